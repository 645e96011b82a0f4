"""``teamctl watch``: the live view of the team (members, tasks, inboxes, jobs, cron, worktrees).

Redrawn when the journal or a mailbox changes, never on a timer of its own. ``--once`` prints one
snapshot; ``--once --json`` prints it as JSON for programs. rich and watchfiles are imported
inside the command (docs/ARCHITECTURE.md, "Start-up and benchmarks").
"""

from __future__ import annotations

import click

from actors.cli.common import echo_json, json_option


@click.command("watch")
@click.option("--once", is_flag=True, help="Print one snapshot and exit.")
@json_option
def watch(once: bool, as_json: bool) -> None:
    """Live view of the team, redrawn on every change (Ctrl-C exits)."""
    if as_json and not once:
        raise click.UsageError("--json needs --once (one snapshot as a JSON document)")
    from actors.cli.common import console
    from actors.live.view import LiveSource, render, watch_live

    with LiveSource.open() as source:
        if once:
            snap = source.load()
            if as_json:
                echo_json(snap.as_json())
            else:
                console().print(render(snap))
            return
        try:
            watch_live(source, console())
        except KeyboardInterrupt:
            return


COMMANDS = (watch,)
