"""The host's commit service in a process of its own (docs/ARCHITECTURE.md, "One commit queue per
host"), started by the serving runtime's ``ServiceHandOff`` when the first other process of the
host connects:

    python -m actors.runtime.commit_host REPO_ROOT LISTENER_FD

``LISTENER_FD`` is the service's socket, bound and listening, inherited from the runtime. This
process opens the team, serves the socket with a ``SharedCommits`` of its own board until its
standard input closes (the runtime stopped it, or died), and exits. A Ctrl-C at the terminal is
not for it: the runtime decides when it stops. If it cannot open the team it exits 1 with one
line on stderr; the socket closes with it, and the clients commit by themselves.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from actors.factory import open_team
from actors.runtime.commit_service import CommitServer
from actors.runtime.commits import SharedCommits

__all__ = ["main"]

log = logging.getLogger("teamctl.commit_host")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m actors.runtime.commit_host REPO_ROOT LISTENER_FD", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s commit service: %(message)s")
    listener = socket.socket(fileno=int(args[1]))
    try:
        team = open_team(Path(args[0]), actor="runtime")
    except Exception as exc:  # any reason is reported the same way
        print(f"commit service: cannot open the team: {exc}", file=sys.stderr)
        return 1
    try:
        server = CommitServer(
            listener.getsockname(), SharedCommits(team.board).serve, listener=listener
        )
        server.start()
        try:
            sys.stdin.buffer.read()  # until the runtime closes the pipe, or dies
        finally:
            server.stop()
    finally:
        team.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
