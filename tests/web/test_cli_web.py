"""``teamctl web`` start-up: ``--help`` stays light, and a host other than loopback is warned
about on stderr after the URL (README.md, "Web dashboard")."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from typing import Any, cast

import pytest

WEB_STACK = ("starlette", "uvicorn", "sse_starlette", "anyio", "httpx", "actors.web")


def test_web_help_imports_no_web_stack() -> None:
    code = (
        "import sys\n"
        "from actors.cli.main import cli\n"
        "try:\n"
        "    cli(['web', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"stack = {WEB_STACK!r}\n"
        "print(sorted(m for m in sys.modules if m.startswith(stack)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--no-open" in done.stdout  # the probe itself works
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(("host", "warned"), [("192.0.2.7", True), ("127.0.0.1", False)])
def test_the_url_comes_first_and_a_non_loopback_host_is_warned_about(
    host: str, warned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from actors.web import server as web_server

    # Listen on loopback whatever the host (no test opens a port beyond this machine), and
    # return from serving once started (the URL is printed when the server has started).
    real_bind = web_server.bind
    monkeypatch.setattr(web_server, "bind", lambda _host, _port: real_bind("127.0.0.1", 0))
    served: list[Any] = []

    async def started(self: Any, sockets: Any = None) -> None:
        self.started = True

    def run(self: Any, sockets: Any = None) -> None:
        served.append(sockets)
        asyncio.run(self.startup(sockets))

    monkeypatch.setattr(uvicorn.Server, "startup", started)
    monkeypatch.setattr(uvicorn.Server, "run", run)
    out, err = io.StringIO(), io.StringIO()
    web_server.serve(cast(Any, object()), host=host, port=0, open_browser=False, out=out, err=err)
    assert len(served) == 1
    [url] = out.getvalue().splitlines()
    assert url.startswith(f"http://{host}:") and "/?token=" in url
    if warned:
        assert err.getvalue() == (
            f"warning: serving on {host}, not only on this machine: anyone who can reach it "
            "and has the URL's token can see the team and answer its approvals\n"
        )
    else:
        assert err.getvalue() == ""
