"""Journal commands: ``events``, ``replay --verify``, ``journal check``, ``journal export`` and
``journal salvage`` (alias ``repair``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, echo_json_line, json_option, show, team_session, text_table
from teamctl_base.text import one_line, safe

if TYPE_CHECKING:
    from actors.factory import Team
    from mailboxes.events import Event


SUMMARY_CHARS = 200
"""An event's data is cut to this many characters in text output (``--json`` has it whole)."""


def event_json(event: Event) -> dict[str, Any]:
    """The JSON a program reads for one event (the journal's field names, without the CRC)."""
    return event.model_dump(mode="json")


def _summary(event: Event) -> str:
    """The event's data on one line: agent text escaped, cut to ``SUMMARY_CHARS``."""
    text = " ".join(
        f"{k}={v}" for k, v in event.data.items() if v is not False and v not in (None, "", [], {})
    )
    return one_line(text, SUMMARY_CHARS)


def _stamp(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def _line(event: Event) -> str:
    actor = safe(event.actor)
    return (
        f"{event.seq:>6}  {_stamp(event.ts)}  {actor:<10} {safe(event.type):<22} {_summary(event)}"
    )


@click.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events (Ctrl-C stops).")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only events after SEQ.")
@json_option
def events(follow: bool, since: int, as_json: bool) -> None:
    """Show the journal (one JSON object per line with --json)."""
    with team_session(read_only=True) as team:
        last = since
        batch = list(team.journal.read_from(since + 1))
        if batch:
            last = batch[-1].seq
        if as_json:
            for event in batch:
                echo_json_line(event_json(event))
        elif follow:
            for event in batch:
                click.echo(_line(event))
        elif batch:
            grid = text_table(
                None, ("seq", "time", "actor", "type", "data"), max_cell=SUMMARY_CHARS
            )
            for event in batch:
                grid.add_row(
                    str(event.seq), _stamp(event.ts), event.actor, event.type, _summary(event)
                )
            show(grid)
        else:
            click.echo("no events")
        if follow:
            try:
                _follow(team, last, as_json)
            except KeyboardInterrupt:
                return


def _follow(team: Team, last: int, as_json: bool) -> None:
    """Print events as they are appended: woken by the file watcher, never by a sleep loop."""
    import threading

    wake = threading.Event()
    watcher = team.watch(lambda _hints: wake.set(), inboxes=False)
    watcher.start()
    try:
        while True:
            for event in team.journal.read_from(last + 1):
                last = event.seq
                if as_json:
                    echo_json_line(event_json(event))
                else:
                    click.echo(_line(event))
            # The watcher also ticks every couple of seconds, so a dropped hint costs one tick.
            wake.wait()
            wake.clear()
    finally:
        watcher.stop()


@click.command()
@click.option("--verify", is_flag=True, required=True, help="Diff projections against disk.")
@json_option
def replay(verify: bool, as_json: bool) -> None:
    """Fold the whole journal in a scratch folder and diff every projection against disk."""
    with team_session() as team:
        drift = team.verify_projections()
        seq = team.journal.last_seq()
    if as_json:
        echo_json({"seq": seq, "ok": not drift, "drift": drift})
    elif drift:
        click.echo(f"drift found after replaying {seq} events:")
        for line in drift:
            click.echo(f"  {line}")
    else:
        click.echo(f"replayed {seq} events: projections match the journal")
    if drift:
        raise click.exceptions.Exit(1)


@click.group()
def journal() -> None:
    """Inspect the journal; salvage a damaged one."""


@journal.command("check")
@json_option
def journal_check(as_json: bool) -> None:
    """Read-only health report of the journal (exit 1 on corruption)."""
    from actors.factory import check_team_journal

    report = check_team_journal()
    if as_json:
        echo_json(
            {
                "path": report.path,
                "ok": report.ok,
                "lines": report.lines,
                "last_seq": report.last_seq,
                "problem": report.problem,
                "problem_line": report.problem_line,
                "repairable": report.repairable,
            }
        )
    elif report.ok:
        click.echo(f"journal ok: {report.lines} events, last seq {report.last_seq}")
    elif report.repairable:
        click.echo(
            f"journal line {report.problem_line} (the last) is torn: {report.problem}; "
            f"{report.last_seq} good events before it. The next command repairs it."
        )
    else:
        click.echo(
            f"journal CORRUPT at line {report.problem_line}: {report.problem}; "
            f"{report.last_seq} good events before it. Nothing was changed; "
            "`teamctl journal salvage` keeps those events and drops the rest."
        )
    if not report.ok and not report.repairable:
        raise click.exceptions.Exit(1)


@journal.command("salvage")
@json_option
def journal_salvage(as_json: bool) -> None:
    """Keep the events before the first corrupt line; the original is kept as a backup.

    Refused while a runtime (or a `teamctl join`) runs the team. The projections are rebuilt
    from what was kept; nothing is done to a sound journal.
    """
    from actors.factory import salvage_team

    report = salvage_team()
    seqs = report.dropped_seqs
    if as_json:
        echo_json(
            {
                "path": report.path,
                "salvaged": report.backup is not None,
                "backup": report.backup,
                "kept": report.kept,
                "problem": report.problem,
                "problem_line": report.problem_line,
                "dropped_lines": report.dropped_lines,
                "dropped_seqs": list(seqs) if seqs else None,
                "dropped_intact": report.dropped_intact,
                "bytes_dropped": report.bytes_dropped,
            }
        )
    elif report.backup is None:
        click.echo(f"journal ok: {report.kept} events, nothing to salvage")
    else:
        assert seqs is not None
        click.echo(f"journal salvaged: kept events 1-{report.kept} ({report.path})")
        click.echo(
            f"dropped {report.dropped_lines} line(s) from line {report.problem_line} "
            f"(seq {seqs[0]}-{seqs[1]}, {report.bytes_dropped} bytes, "
            f"{report.dropped_intact} intact events after the bad one): {report.problem}"
        )
        click.echo(f"original kept as {report.backup}")
        click.echo("projections rebuilt from the kept events")


@journal.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace FILE when it exists.")
def journal_export(file: Path, force: bool) -> None:
    """Write the whole journal (either backend) to FILE as an ordinary journal.jsonl: a
    backup, for offline inspection, or to move the team (`teamctl init --import FILE`)."""
    from actors.factory import export_journal

    count = export_journal(file, force=force)
    click.echo(f"exported {count} events to {file}")


journal.add_command(journal_salvage, "repair")

COMMANDS = (events, replay, journal)
