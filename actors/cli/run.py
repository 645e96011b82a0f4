"""``teamctl run``, ``resume``, ``stop`` and ``join``: the commands that host the team runtime.

``run [PROMPT]`` starts (or continues) the team with a lead; ``--headless`` runs until the team is
idle and exits (``--output-format stream-json``: one JSON event per line, then a ``result``);
without it a line console feeds the lead (``/status``, ``/tasks``, ``/watch``, ``/stop NAME``,
``/quit``) and keeps a live status line: who is working on what and the task counts, printed again
each time it changes. It is redrawn from the runtime's events (``actors.scenarios.demo.LiveFeed`` over the
running team), never on a timer; to a terminal it is coloured, to a pipe it is plain text.
``resume`` is ``run`` without a prompt. ``join NAME`` hosts one existing teammate in this process
next to a running runtime. ``stop NAME [--force]`` asks a teammate to shut down (or stops it now).

Leaving (Ctrl-C, SIGTERM, ``/quit``, the end of a headless run, a member failing) pauses the team:
every member keeps its claim, conversation and unread mail, and ``resume`` brings them back and
says whom. Only ``stop NAME`` and ``run --fresh`` retire members (docs/RELIABILITY.md, "Stop and
resume"). The exit code says how a headless run ended (``EXIT_*`` below, the README's table), and
the stream-json ``result`` carries the same outcome as ``subtype``/``is_error``/``exit_code``.

A scripted model from a YAML/JSON file replaces the real one with the hidden ``--script FILE``
option or ``TEAMCTL_SCRIPT`` (the scenario runner and end-to-end tests use it).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from actors.cli.common import echo_json_line
from teamctl_base.text import one_line, safe

if TYPE_CHECKING:
    from actors.live.snapshot import Snapshot
    from actors.runtime.runtime import TeamRuntime
    from actors.scenarios.demo import LiveFeed

EXIT_OK = 0
"""The team finished: idle, and every task completed (or there were none)."""
EXIT_UNFINISHED = 3
"""The run ended (idle, or ``--timeout``) with tasks pending, blocked or in progress."""
EXIT_MEMBER_FAILED = 4
"""A member failed for good: a rejected API key (not retried), or no restart left."""
EXIT_STOPPED = 130
"""Stopped by the user (Ctrl-C or SIGTERM); the team is paused and ``resume`` continues it."""
_F = TypeVar("_F", bound=Callable[..., Any])

_script = click.option(
    "--script",
    "script",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="TEAMCTL_SCRIPT",
    hidden=True,
    help="Play a scripted model from this YAML/JSON file instead of calling an API.",
)
_model = click.option("--model", default=None, help="Model for every agent (overrides settings).")
_format = click.option(
    "--output-format",
    type=click.Choice(["text", "stream-json"]),
    default="text",
    show_default=True,
)
_mode = click.option(
    "--permission-mode",
    type=click.Choice(["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]),
    default=None,
    help="Overrides permissions.defaultMode.",
)
_timeout = click.option(
    "--timeout", type=float, default=None, help="Headless: give up after this many seconds."
)
_headless = click.option("--headless", is_flag=True, help="Run until the team is idle, then exit.")


def _runtime_options(*, whole_team: bool) -> Callable[[_F], _F]:
    """The options of the commands that host the runtime, in help order: ``--output-format``,
    ``--model`` and the hidden ``--script`` for all three; ``run`` and ``resume`` (``whole_team``)
    add ``--headless`` first and ``--permission-mode`` and ``--timeout``."""
    options = (
        (_headless, _format, _model, _mode, _script, _timeout)
        if whole_team
        else (_format, _model, _script)
    )

    def apply(command: _F) -> _F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that ``finally`` stops the runtime."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


class _Printer:
    """Runtime events as text lines or JSON lines."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            if self.fmt == "stream-json":
                echo_json_line(dict(event))
                return
            line = _text_line(event)
            if line:
                click.echo(safe(line, multiline=True))  # agent text: escaped

    def line(self, text: str) -> None:
        """One line of its own (not interleaved with an event's)."""
        with self._lock:
            click.echo(text)


def status_line(snap: Snapshot) -> str:
    """Who is working on what, and the task counts, on one line."""
    people = []
    for m in snap.members:
        if m.status == "stopped":
            continue
        text = f"{m.name} {m.status}"
        if m.task_id:
            text += f" on {m.task_id}" + (f" in {m.worktree}" if m.worktree else "")
        people.append(text)
    n = snap.task_counts()
    parts = [*people, f"tasks {n['in_progress']} in progress, {n['ready']} ready, "]
    parts[-1] += f"{n['blocked']} blocked, {n['completed']} done"
    if snap.approvals:
        parts.append(f"{len(snap.approvals)} awaiting approval")
    return "── " + " · ".join(parts) + " ──"


class _StatusLine:
    """Shows each live snapshot as a status line, when the line changed."""

    def __init__(self, printer: _Printer, *, styled: bool) -> None:
        self.printer = printer
        self.styled = styled
        self.last = ""

    def __call__(self, snap: Snapshot) -> None:
        line = status_line(snap)
        if line == self.last:
            return
        self.last = line
        self.printer.line(click.style(line, fg="cyan") if self.styled else line)


def _tee(*sinks: Any) -> Any:
    def on_event(event: Mapping[str, Any]) -> None:
        for sink in sinks:
            sink(event)

    return on_event


def _text_line(event: Mapping[str, Any]) -> str | None:
    kind, agent = event.get("type"), event.get("agent", "")
    if kind == "assistant":
        return f"[{agent}] {event['text']}"
    if kind == "tool_use":
        args = json.dumps(event.get("input"), ensure_ascii=False)
        return f"[{agent}] -> {event['name']} {args[:200]}"
    if kind == "status":
        return f"[{agent}] is {event['status']}"
    if kind == "error":
        return f"[{agent}] error: {event['error']}"
    if kind == "model_wait":
        return f"[{agent}] {event['message']}"
    if kind == "degraded":
        return f"[team] degraded: {event['reason']}; waiting for free space"
    if kind == "recovered":
        return "[team] recovered: free space again, resuming the interrupted work"
    if kind == "failed":
        return f"[{agent}] failed and stays down: {event['error']}"
    if kind == "resumed":
        return "[team] resumed " + ", ".join(_resumed_text(m) for m in event["members"])
    return None


def _resumed_text(member: Mapping[str, Any]) -> str:
    details = [str(member["was"])]
    if member.get("task_id"):
        details.append(f"on {member['task_id']}")
    if member.get("unread"):
        details.append(f"{member['unread']} unread")
    return f"{member['name']} ({', '.join(details)})"


def _model_source(script: Path | None) -> Any:
    from actors.runtime.members import missing_key_message, scripted_models

    if script is not None:
        return scripted_models(script)
    problem = missing_key_message()
    if problem:
        raise click.ClickException(problem)
    return None  # the runtime builds AnthropicModel clients from the settings


def _settings(model: str | None) -> Any:
    from actors.repo import find_team
    from actors.settings import load_settings

    settings = load_settings(find_team().settings_path)
    if model:
        models = settings.models.model_copy(update={"lead": model, "teammate": model})
        settings = settings.model_copy(update={"models": models})
    return settings


def _summary(rt: TeamRuntime, *, timed_out: bool = False, stopped: bool = False) -> dict[str, Any]:
    """The run's ``result``: its outcome (``subtype``, ``is_error``, ``exit_code``), the task
    counts, the unfinished tasks and the members that failed. Read before the runtime stops."""
    state = rt.board.refresh()
    counts: dict[str, int] = {}
    for task in state.tasks.values():
        counts[task.status] = counts.get(task.status, 0) + 1
    unfinished = [t.id for t in state.tasks.values() if t.status not in ("completed", "deleted")]
    failed = rt.failures()
    if stopped:
        subtype, code = "error_interrupted", EXIT_STOPPED
    elif failed:
        subtype, code = "error_member_failed", EXIT_MEMBER_FAILED
    elif timed_out:
        subtype, code = "error_timeout", EXIT_UNFINISHED
    elif unfinished:
        subtype, code = "error_unfinished_tasks", EXIT_UNFINISHED
    else:
        subtype, code = "success", EXIT_OK
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": code != EXIT_OK,
        "exit_code": code,
        "tasks": counts,
        "unfinished": unfinished,
        "failed": failed,
        "members": {m.name: m.status for m in state.members.values()},
    }


def _report(printer: _Printer, output_format: str, summary: Mapping[str, Any]) -> int:
    """The last line(s) of a run; returns its exit code."""
    code = int(summary["exit_code"])
    if output_format == "stream-json":
        printer(summary)
        return code
    tasks, subtype = summary["tasks"], summary["subtype"]
    if subtype == "success":
        click.echo(f"team idle: tasks {tasks}")
    elif subtype == "error_unfinished_tasks":
        left = ", ".join(summary["unfinished"])
        click.echo(f"team idle with unfinished tasks ({left}): tasks {tasks}")
    elif subtype == "error_timeout":
        click.echo(f"team not idle at the timeout: tasks {tasks}")
    elif subtype == "error_member_failed":
        for name, error in summary["failed"].items():
            click.echo(f"error: {name} failed: {error}", err=True)
    if code != EXIT_OK:
        click.echo("the team is paused: `teamctl resume` continues it", err=True)
    return code


def _run(
    prompt: str | None,
    *,
    headless: bool,
    output_format: str,
    model: str | None,
    permission_mode: str | None,
    script: Path | None,
    timeout: float | None,
    fresh: bool = False,
) -> int:
    from actors.runtime.runtime import TeamRuntime

    source = _model_source(script)
    printer = _Printer(output_format)
    interactive = not headless and sys.stdin.isatty()
    feed = None
    if interactive and output_format == "text":
        from actors.scenarios.demo import LiveFeed

        feed = LiveFeed(_StatusLine(printer, styled=sys.stdout.isatty()))
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    rt = TeamRuntime(
        model=source,
        settings=_settings(model),
        on_event=printer if feed is None else _tee(printer, feed),
        permission_mode=permission_mode,
        fresh=fresh,
    )
    try:
        rt.start()
        if feed is not None:
            from actors.live.load import LiveSource

            feed.attach(LiveSource(rt.team))
        if prompt:
            rt.submit(prompt)
        if not interactive:
            # A member that failed for good ends the run at once (nobody would do its part).
            ended = rt.wait_until(lambda: bool(rt.failures()) or rt.is_idle(), timeout)
            summary = _summary(rt, timed_out=not ended)
            rt.stop("member_failed" if summary["failed"] else "run_ended")
            return _report(printer, output_format, summary)  # last: after the stop's events
        _console(rt, feed)
        rt.stop("quit")
        return EXIT_OK
    except (_Terminated, KeyboardInterrupt):
        click.echo("stopping the team: pausing every member (claims and mail kept)", err=True)
        try:
            summary = _summary(rt, stopped=True)
        except Exception:  # interrupted while starting: the team may not be readable
            summary = {"type": "result", "subtype": "error_interrupted", "is_error": True}
            summary["exit_code"] = EXIT_STOPPED
        rt.stop("interrupted")
        return _report(printer, output_format, summary)
    finally:
        if feed is not None:
            feed.close()  # the last status line, while the team is still open
        rt.stop()
        signal.signal(signal.SIGTERM, previous)


def _console(rt: TeamRuntime, feed: LiveFeed | None = None) -> None:
    """A line console for the lead: text goes to the lead; ``/`` commands act on the team."""
    click.echo(
        "Type to talk to the lead; /status, /tasks, /watch, /approve ID, /reject ID FEEDBACK, "
        "/stop NAME, /quit.",
        err=True,
    )
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return
        if line == "/status":
            for m in rt.services.members():
                click.echo(f"{m.name}: {m.status}" + (f" on {m.task_id}" if m.task_id else ""))
        elif line == "/tasks":
            for t in rt.board.refresh().tasks.values():
                click.echo(f"{t.id} [{t.status}] {t.owner or '-'} {one_line(t.subject)}")
        elif line == "/watch":
            _panel(rt, feed)
        elif line.startswith("/stop "):
            rt.services.request_shutdown(line.split(None, 1)[1].strip(), by="lead")
        elif line.startswith(("/approve ", "/reject ")):
            _answer(rt, line)
        else:
            rt.submit(line)


def _panel(rt: TeamRuntime, feed: LiveFeed | None) -> None:
    """``/watch``: the whole live view once (members, tasks, inboxes, jobs, cron, worktrees)."""
    from actors.cli.common import console
    from actors.live.view import LiveSource, render

    snap = feed.last if feed is not None else None
    console().print(render(snap if snap is not None else LiveSource(rt.team).load()))


def _answer(rt: TeamRuntime, line: str) -> None:
    """``/approve ID [note]`` or ``/reject ID feedback``: a plan or a permission request."""
    from actors.board.protocols import decide_permission
    from actors.protocols import review_plan

    command, _, rest = line.partition(" ")
    request_id, _, note = rest.strip().partition(" ")
    approve = command == "/approve"
    try:
        if request_id.startswith("plan-"):
            review_plan(rt.services, request_id, approve, note, reviewer="human")
        else:
            answer = decide_permission(rt.board, request_id, approve, by="human", reason=note)
            rt.decisions.notify(answer)
    except Exception as exc:  # a typo in the console is not fatal
        click.echo(f"error: {exc}", err=True)
        return
    click.echo(f"{'approved' if approve else 'rejected'} {request_id}")


@click.command("run")
@click.argument("prompt", required=False)
@_runtime_options(whole_team=True)
@click.option(
    "--fresh",
    is_flag=True,
    help="Retire every teammate (claims released) and start the lead on a new conversation.",
)
def run_command(
    prompt: str | None,
    headless: bool,
    output_format: str,
    model: str | None,
    permission_mode: str | None,
    script: Path | None,
    timeout: float | None,
    fresh: bool,
) -> None:
    """Start the team (or continue it, paused members included) with PROMPT for the lead."""
    sys.exit(
        _run(
            prompt,
            headless=headless,
            output_format=output_format,
            model=model,
            permission_mode=permission_mode,
            script=script,
            timeout=timeout,
            fresh=fresh,
        )
    )


@click.command("resume")
@_runtime_options(whole_team=True)
def resume_command(
    headless: bool,
    output_format: str,
    model: str | None,
    permission_mode: str | None,
    script: Path | None,
    timeout: float | None,
) -> None:
    """Bring back every member that was not stopped (paused ones included), with its
    transcript, claim and mail; says whom it brought back."""
    sys.exit(
        _run(
            None,
            headless=headless,
            output_format=output_format,
            model=model,
            permission_mode=permission_mode,
            script=script,
            timeout=timeout,
        )
    )


@click.command("join")
@click.argument("name")
@_runtime_options(whole_team=False)
def join_command(name: str, output_format: str, model: str | None, script: Path | None) -> None:
    """Host the existing teammate NAME in this process, next to a running team."""
    from actors.runtime.runtime import TeamRuntime

    source = _model_source(script)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    rt = TeamRuntime(
        model=source, settings=_settings(model), on_event=_Printer(output_format), join=name
    )
    code = EXIT_OK
    try:
        rt.start()
        rt.wait_until(
            lambda: rt.board.refresh().members[name].status == "stopped" or bool(rt.failures())
        )
        for member, error in rt.failures().items():
            click.echo(f"error: {member} failed: {error}", err=True)
            code = EXIT_MEMBER_FAILED
    except (_Terminated, KeyboardInterrupt):
        click.echo(
            f"pausing {name} (claim and mail kept; `teamctl join {name}` continues)", err=True
        )
        code = EXIT_STOPPED
    finally:
        rt.stop("interrupted" if code == EXIT_STOPPED else "run_ended")
        signal.signal(signal.SIGTERM, previous)
    sys.exit(code)


@click.command("stop")
@click.argument("name")
@click.option("--force", is_flag=True, help="Stop it now instead of asking.")
def stop_command(name: str, force: bool) -> None:
    """Ask teammate NAME to shut down (``--force``: stop it now)."""
    from actors.cli.common import team_session
    from actors.runtime.stop import request_stop

    with team_session() as team:
        click.echo(request_stop(team, name, force=force))


COMMANDS = (run_command, resume_command, join_command, stop_command)
