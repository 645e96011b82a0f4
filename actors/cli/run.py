"""``teamctl run``, ``resume``, ``stop`` and ``join``: the commands that host the team runtime.

``run [PROMPT]`` starts (or continues) the team with a lead; ``--headless`` runs until the team is
idle and exits (``--output-format stream-json``: one JSON event per line, then a ``result``);
without it a line console feeds the lead (``/status``, ``/tasks``, ``/watch``, ``/stop NAME``,
``/goal``, ``/quit``) and keeps a live status line: who is working on what and the task counts, printed again
each time it changes. It is redrawn from the runtime's events (``actors.scenarios.demo.LiveFeed`` over the
running team), never on a timer; to a terminal it is coloured, to a pipe it is plain text.
``resume`` is ``run`` without a prompt. ``join NAME`` hosts one teammate (new, or on the team and
hosted nowhere) in this process next to the team's runtime, with its own worktrees and jobs. ``stop NAME [--force]`` asks a teammate to shut down (or stops it now).

Leaving (Ctrl-C, SIGTERM, ``/quit``, the end of a headless run, a member failing) pauses the team:
every member keeps its claim, conversation and unread mail, and ``resume`` brings them back and
says whom. Only ``stop NAME`` and ``run --fresh`` retire members (docs/RELIABILITY.md, "Stop and
resume"). The exit code says how a headless run ended (``EXIT_*`` below, the README's table), and
the stream-json ``result`` carries the same outcome as ``subtype``/``is_error``/``exit_code``,
and the team's model usage (``usage``, ``total_cost_usd``: what ``teamctl cost`` totals).

Approvals (the README's "Approvals"): in the console every pending request routed to the human
(the lead's own asks, teammates' permission requests, plans when ``approvals.plans`` is
``human``) is shown with its id as it appears and answered in place (``y``, ``n``, ``always``,
or text: a denial with that feedback), or with ``/approve ID`` / ``/reject ID TEXT``, or from
any terminal with ``teamctl approve|reject ID``: all journaled the same way. A headless run
refuses at once what nobody can answer, saying on stderr (a ``permission_refused`` event in
stream-json) which flag or rule would allow it; ``--approvals human`` makes it wait instead and
print the request id and the command that answers it (a ``permission_request`` event).

Goals (the README's "Goals"): ``--goal TEXT`` / ``--goal-check CMD`` give the lead a goal
(``actors.runtime.goal``): its stops are judged, a blocked stop goes on with the reason, and a
headless run ends ``success`` only once the goal holds (and no task is left); the cap of blocked
stops ends it ``error_goal_unmet`` (``EXIT_UNFINISHED``), an impossible goal or an evaluator error
``error_goal_impossible`` / ``error_goal_evaluator`` (``EXIT_GOAL_FAILED``), one line on stderr.
``resume`` goes on with the recorded goal. The console's ``/goal TEXT``, ``/goal`` and
``/goal clear`` set, show and clear it through the lead's actor.

A scripted model from a YAML/JSON file replaces the real one with the hidden ``--script FILE``
option or ``TEAMCTL_SCRIPT`` (the scenario runner and end-to-end tests use it).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from actors.cli.common import echo_json_line
from teamctl_base.text import one_line, safe

if TYPE_CHECKING:
    from actors.board.state import PlanRequest, TeamState
    from actors.live.snapshot import ApprovalRow, Snapshot
    from actors.runtime.permission_requests import HumanAsk, HumanDesk
    from actors.runtime.runtime import TeamRuntime
    from actors.scenarios.demo import LiveFeed
    from harness.goal import Goal, GoalStatus
    from harness.settings import PermissionMode
    from harness.tools.base import AccessKind
    from mailboxes.events import PermissionRequested

EXIT_OK = 0
"""The team finished: idle, and every task completed (or there were none)."""
EXIT_UNFINISHED = 3
"""The run ended (idle, ``--timeout``, or a cap of the ``team`` settings reached) with work
left: tasks pending, blocked or in progress."""
EXIT_MEMBER_FAILED = 4
"""A member failed for good: a rejected API key (not retried), or no restart left."""
EXIT_DISK_FULL = 5
"""Headless: the disk stayed full for ``team.disk_full_grace_s``; the team is paused."""
EXIT_GOAL_FAILED = 1
"""The lead's goal was judged impossible, or its evaluator failed (never a success)."""
EXIT_STOPPED = 130
"""Stopped by the user (Ctrl-C or SIGTERM); the team is paused and ``resume`` continues it."""
_F = TypeVar("_F", bound=Callable[..., Any])

_run_over = threading.Event()
"""A team run has stopped in this process (every member paused, the team closed, the report
written): the console-script entry point may leave at once (``leave_now``)."""


def leave_now(done: SystemExit) -> None:
    """Once a team run has stopped (``run``, ``resume``, ``join``), end the process with the
    run's exit code at once: flush logging and stdio, then ``os._exit``, skipping the
    interpreter's teardown of the thousands of modules a run imports (half a second on a quiet
    machine, seconds on a busy one; docs/RELIABILITY.md, "Stop and resume"). Nothing acknowledged
    is lost: every journal event and message is durable once written, and the stop closed the
    transcripts, stopped the MCP servers and killed the jobs. Does nothing otherwise. Only the
    console-script entry point calls it (``actors.cli.main.main``), never click's test runner."""
    if not _run_over.is_set():
        return
    import logging
    import os

    code = done.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): what the interpreter would do
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


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
_approvals = click.option(
    "--approvals",
    type=click.Choice(["human", "lead", "deny"]),
    default=None,
    help="Who answers teammates' asks (overrides approvals.permissions). Headless: `human` "
    "waits for `teamctl approve|reject ID`; otherwise an ask for a person is refused at once.",
)


_goal_options = (
    click.option(
        "--goal",
        "goal_text",
        default=None,
        help="A condition an evaluator model call must confirm.",
    ),
    click.option(
        "--goal-check",
        "goal_check",
        default=None,
        help="A shell command that must exit 0 before the lead may stop.",
    ),
    click.option(
        "--goal-max-blocks",
        type=click.IntRange(min=1),
        default=10,
        show_default=True,
        help="Blocked stops of the lead in a row before the goal is given up (exit 3).",
    ),
)


def _goal(text: str | None, check: str | None, max_blocks: int) -> Goal | None:
    """The ``Goal`` of ``--goal`` / ``--goal-check`` (None without either)."""
    if text is None and check is None:
        return None
    if not (text or "").strip() and not (check or "").strip():
        raise click.UsageError("--goal / --goal-check must not be empty")
    from harness.goal import Goal

    return Goal(
        condition=(text or "").strip() or None,
        check=(check or "").strip() or None,
        max_blocks=max_blocks,
    )


def _runtime_options(*, whole_team: bool) -> Callable[[_F], _F]:
    """The options of the commands that host the runtime, in help order: ``--output-format``,
    ``--model`` and the hidden ``--script`` for all three; ``run`` and ``resume`` (``whole_team``)
    add ``--headless`` first and ``--permission-mode``, ``--approvals`` and ``--timeout``."""
    options = (
        (_headless, _format, _model, _mode, _approvals, _script, _timeout, *_goal_options)
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
    if kind == "cap_reached":
        return f"[{agent}] stops: {event['message']}"
    if kind == "resumed":
        return "[team] resumed " + ", ".join(_resumed_text(m) for m in event["members"])
    if kind == "team_event" and str(event.get("event", "")).startswith("goal."):
        return _goal_line(event)
    if kind == "team_event" and str(event.get("event", "")).startswith("workflow."):
        from actors.workflows.record import progress_line  # phases, steps, log lines

        line = progress_line(str(event["event"]), event.get("data") or {})
        return None if line is None else f"[{event.get('actor', '')}] {one_line(line, 500)}"
    return None


def _goal_line(event: Mapping[str, Any]) -> str:
    """A ``goal.*`` journal event as one line of the text output."""
    who, kind, data = event.get("actor", ""), event["event"], event.get("data") or {}
    if kind == "goal.set":
        goal = data.get("goal") or {}
        what = " and ".join(
            [
                *([goal["condition"]] if goal.get("condition") else []),
                *([f"`{goal['check']}` exits 0"] if goal.get("check") else []),
            ]
        )
        return f"[{who}] goal set: {what}"
    if kind == "goal.cleared":
        return f"[{who}] goal cleared"
    reason = one_line(str(data.get("reason", "")), 300)
    if data.get("state") == "active":
        return f"[{who}] goal not met yet (blocked stop {data.get('blocks')}): {reason}"
    return f"[{who}] goal {data.get('state')}: {reason}"


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


def _settings(model: str | None, approvals: str | None = None, mode: str | None = None) -> Any:
    """The merged settings of every scope (warnings printed once), ``--model`` and
    ``--approvals`` applied; ``mode`` (``--permission-mode``) is refused when disabled."""
    from actors.cli.settings_cmd import load_for_command

    settings = load_for_command(mode=mode).settings
    if model:
        models = settings.models.model_copy(update={"lead": model, "teammate": model})
        settings = settings.model_copy(update={"models": models})
    if approvals:
        routing = settings.approvals.model_copy(update={"permissions": approvals})
        settings = settings.model_copy(update={"approvals": routing})
    return settings


def _schedule(settings: Any) -> None:
    """Before the runtime starts its threads: a team process runs under ``SCHED_BATCH`` unless
    ``team.cpu_scheduling`` says ``normal`` (``actors.runtime.process.batch_scheduling``)."""
    if settings.team.cpu_scheduling == "batch":
        from actors.runtime.process import batch_scheduling

        batch_scheduling()


def _answer_commands(request_id: str) -> tuple[str, str]:
    return f"teamctl approve {request_id}", f'teamctl reject {request_id} --feedback "..."'


class _PlanAnnouncer:
    """Headless, plans reviewed by a person: each submitted plan is announced once with its id
    and the commands that answer it (stderr, or a ``plan_request`` event in stream-json).

    Plans are seen as the watcher reports ``plan.submitted``; ``flush`` announces, from the
    board, any the run ended before the watcher reported (the journal is the truth)."""

    def __init__(self, printer: _Printer) -> None:
        self.printer = printer
        self._announced: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("type") != "team_event" or event.get("event") != "plan.submitted":
            return
        data = event.get("data") or {}
        self._announce(
            str(data.get("request_id", "")),
            data.get("owner"),
            data.get("task_id"),
            data.get("plan"),
        )

    def flush(self, state: TeamState) -> None:
        for request in state.plan_requests.values():
            if request.status == "submitted":
                self._announce(request.request_id, request.teammate, request.task_id, request.plan)

    def _announce(self, rid: str, owner: Any, task_id: Any, plan: Any) -> None:
        with self._lock:
            if rid in self._announced:
                return
            self._announced.add(rid)
        approve, reject = _answer_commands(rid)
        if self.printer.fmt == "stream-json":
            self.printer(
                {
                    "type": "plan_request",
                    "request_id": rid,
                    "agent": owner,
                    "task_id": task_id,
                    "plan": plan,
                    "approve": approve,
                    "reject": reject,
                }
            )
            return
        click.echo(
            safe(
                f"[approval] {rid}: {owner} submitted a plan for {task_id} (`teamctl plans` "
                f"shows it); answer with `{approve}` or `{reject}`"
            ),
            err=True,
        )


def _desk(
    settings: Any,
    printer: _Printer,
    *,
    console: bool,
    wait_for_human: bool,
    permission_mode: str | None,
) -> HumanDesk:
    """How this run reaches a person: the console, a headless run that waits for
    ``teamctl approve|reject`` (``--approvals human``), or nobody (asks refused at once)."""
    import time

    from actors.runtime.permission_requests import HumanDesk

    timeout = settings.approvals.timeout_s

    def on_ask(ask: HumanAsk) -> None:
        approve, reject = _answer_commands(ask.request_id)
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + timeout))
        if printer.fmt == "stream-json":
            printer(
                {
                    "type": "permission_request",
                    "request_id": ask.request_id,
                    "agent": ask.agent,
                    "tool": ask.tool,
                    "target": ask.target,
                    "reason": ask.reason,
                    "approve": approve,
                    "reject": reject,
                    "timeout_s": timeout,
                }
            )
            return
        what = f"{ask.tool} on {ask.target}" if ask.target else ask.tool
        click.echo(
            safe(
                f"[approval] {ask.request_id}: {ask.agent} asks to use {what} ({ask.reason}); "
                f"waiting until {until} for `{approve}` or `{reject}`"
            ),
            err=True,
        )

    def on_refused(ask: HumanAsk) -> None:
        if printer.fmt == "stream-json":
            printer(
                {
                    "type": "permission_refused",
                    "request_id": ask.request_id,
                    "agent": ask.agent,
                    "tool": ask.tool,
                    "target": ask.target,
                    "reason": ask.reason,
                    "hint": ask.hint,
                }
            )
            return
        what = f"{ask.tool} on {ask.target}" if ask.target else ask.tool
        click.echo(
            safe(
                f"[{ask.agent}] refused {what} ({ask.request_id}): nobody can approve it in a "
                f"headless run: {ask.hint}"
            ),
            err=True,
        )

    present = console or wait_for_human
    return HumanDesk(
        present=present,
        permissions=settings.permissions,
        mode=cast("PermissionMode | None", permission_mode),
        on_ask=None if console and printer.fmt == "text" else on_ask,
        on_refused=on_refused,
        absent_hint="or run with `--approvals human` and answer with `teamctl approve ID`",
    )


_GOAL_OVER = {
    "unmet": ("error_goal_unmet", EXIT_UNFINISHED),
    "impossible": ("error_goal_impossible", EXIT_GOAL_FAILED),
    "error": ("error_goal_evaluator", EXIT_GOAL_FAILED),
}


def _goal_of(rt: TeamRuntime) -> GoalStatus | None:
    """The status of the goal this run pursues (None: none)."""
    if rt.goal_pursued is None:
        return None
    status = rt.goal.status()
    return status if status.goal is not None else None


def _goal_summary(goal: GoalStatus) -> dict[str, Any]:
    """The ``goal`` object of the ``result`` (as ``teamctl ask`` has it)."""
    assert goal.goal is not None
    return {
        "condition": goal.goal.condition,
        "check": goal.goal.check,
        "state": goal.state,
        "evaluations": goal.evaluations,
        "blocks": goal.blocks,
        "evaluator_tokens": goal.tokens,
        "last_reason": goal.last_reason,
    }


def _summary(rt: TeamRuntime, *, timed_out: bool = False, stopped: bool = False) -> dict[str, Any]:
    """The run's ``result``: its outcome (``subtype``, ``is_error``, ``exit_code``), the task
    counts, the unfinished tasks and the members that failed, and the goal. Read before the
    runtime stops."""
    goal = _goal_of(rt)
    state = rt.board.refresh()
    counts: dict[str, int] = {}
    for task in state.tasks.values():
        counts[task.status] = counts.get(task.status, 0) + 1
    unfinished = [t.id for t in state.tasks.values() if t.status not in ("completed", "deleted")]
    failed = rt.failures()
    disk_full = rt.out_of_space()
    cap = rt.cap_reached()
    if stopped:
        subtype, code = "error_interrupted", EXIT_STOPPED
    elif disk_full is not None:  # the cause: a member that failed meanwhile may be its victim
        subtype, code = "error_disk_full", EXIT_DISK_FULL
    elif failed:
        subtype, code = "error_member_failed", EXIT_MEMBER_FAILED
    elif goal is not None and goal.state in _GOAL_OVER:
        subtype, code = _GOAL_OVER[goal.state]
    elif cap is not None:
        subtype, code = "error_cap_reached", EXIT_UNFINISHED
    elif timed_out:
        subtype, code = "error_timeout", EXIT_UNFINISHED
    elif goal is not None and goal.state != "met":  # idle, its last stop not judged met
        subtype, code = "error_goal_unmet", EXIT_UNFINISHED
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
        **({"disk_full": disk_full} if disk_full is not None else {}),
        **({"cap": cap.as_event()} if cap is not None else {}),
        **({"goal": _goal_summary(goal)} if goal is not None else {}),
        "members": {m.name: m.status for m in state.members.values()},
        # The team's model usage over the whole journal (`teamctl cost`), Claude Code's names.
        "total_cost_usd": state.usage.cost_usd,
        "usage": {
            "input_tokens": state.usage.input_tokens,
            "output_tokens": state.usage.output_tokens,
            "cache_read_input_tokens": state.usage.cache_read_input_tokens,
            "cache_creation_input_tokens": state.usage.cache_creation_input_tokens,
        },
    }


def _report(printer: _Printer, output_format: str, summary: Mapping[str, Any]) -> int:
    """The last line(s) of a run; returns its exit code."""
    code = int(summary["exit_code"])
    if summary.get("subtype") == "error_disk_full":  # for a person, in either format
        click.echo(
            f"error: {safe(summary['disk_full'])} — the team is paused; free space and run "
            "`teamctl resume`",
            err=True,
        )
    if summary.get("subtype") == "error_cap_reached":  # which cap, and how to raise it
        cap = summary["cap"]
        reason, hint = safe(f"cap reached: {cap['reason']}"), safe(cap["hint"])
        click.echo(f"error: {reason} — the team is paused; {hint}", err=True)
    subtype = summary.get("subtype")
    if subtype in ("error_goal_impossible", "error_goal_evaluator", "error_goal_unmet"):
        goal = summary.get("goal") or {}
        reason = one_line(str(goal.get("last_reason") or "the goal was never judged met"), 400)
        if goal.get("state") == "active":
            reason = f"goal not met yet: {reason}"
        tail = "`teamctl resume` goes on with the goal" if code == EXIT_UNFINISHED else ""
        tail = tail or "`teamctl resume` continues the team; the goal stays over"
        click.echo(f"error: {reason} — the team is paused; {tail}", err=True)
    if output_format == "stream-json":
        printer(summary)
        return code
    tasks = summary["tasks"]
    if subtype == "success":
        met = "; goal met" if summary.get("goal") else ""
        click.echo(f"team idle: tasks {tasks}{met}")
    elif subtype == "error_unfinished_tasks":
        left = ", ".join(summary["unfinished"])
        click.echo(f"team idle with unfinished tasks ({left}): tasks {tasks}")
    elif subtype == "error_timeout":
        click.echo(f"team not idle at the timeout: tasks {tasks}")
    elif subtype == "error_member_failed":
        for name, error in summary["failed"].items():
            click.echo(f"error: {name} failed: {error}", err=True)
    elif subtype in ("error_disk_full", "error_cap_reached") or str(subtype).startswith(
        "error_goal_"
    ):
        return code  # its line above says the team is paused
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
    approvals: str | None = None,
    goal: Goal | None = None,
) -> int:
    from actors.runtime.runtime import TeamRuntime

    source = _model_source(script)
    printer = _Printer(output_format)
    interactive = not headless and sys.stdin.isatty()
    settings = _settings(model, approvals, permission_mode)
    _schedule(settings)
    desk = _desk(
        settings,
        printer,
        console=interactive,
        wait_for_human=approvals == "human",
        permission_mode=permission_mode,
    )
    questions = _Questions(printer, desk, plans=settings.approvals.plans == "human")
    feed = None
    if interactive and output_format == "text":
        from actors.scenarios.demo import LiveFeed

        status = _StatusLine(printer, styled=sys.stdout.isatty())

        def show(snap: Snapshot) -> None:
            status(snap)
            questions(snap)

        feed = LiveFeed(show)
    on_event: Any = printer if feed is None else _tee(printer, feed)
    announcer = None
    if not interactive and settings.approvals.plans == "human":
        announcer = _PlanAnnouncer(printer)
        on_event = _tee(on_event, announcer)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    rt = TeamRuntime(
        model=source,
        settings=settings,
        on_event=on_event,
        permission_mode=permission_mode,
        fresh=fresh,
        human=desk,
        # A headless run gives up on a full disk after a grace; the console waits for space.
        disk_grace_s=None if interactive else settings.team.disk_full_grace_s,
        goal=goal,
    )
    questions.runtime = rt
    try:
        rt.start()
        if feed is not None:
            from actors.live.load import LiveSource

            feed.attach(LiveSource(rt.team))
        if prompt:
            rt.submit(prompt)
        elif rt.goal_pursued is not None:  # the goal alone sets the lead going (or going on)
            from actors.runtime.goal import goal_prompt

            rt.submit(goal_prompt(rt.goal_pursued))
        if not interactive:
            # A member that failed for good ends the run at once (nobody would do its part),
            # and so do a disk still full after team.disk_full_grace_s and a cap reached.
            # So does the goal given up (its cap of blocked stops, impossible, evaluator error).
            def ended_early() -> bool:
                goal = _goal_of(rt)
                return (
                    bool(rt.failures())
                    or rt.out_of_space() is not None
                    or rt.cap_reached() is not None
                    or (goal is not None and goal.state in _GOAL_OVER)
                )

            ended = rt.wait_until(lambda: ended_early() or rt.is_idle(), timeout)
            if announcer is not None:
                announcer.flush(rt.board.refresh())
            summary = _summary(rt, timed_out=not ended)
            why = {
                "error_disk_full": "disk_full",
                "error_member_failed": "member_failed",
                "error_cap_reached": "cap_reached",
            }
            rt.stop(why.get(summary["subtype"], "run_ended"))
            return _report(printer, output_format, summary)  # last: after the stop's events
        _console(rt, feed, questions)
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
        _run_over.set()


def _console(
    rt: TeamRuntime, feed: LiveFeed | None = None, questions: _Questions | None = None
) -> None:
    """A line console for the lead: text goes to the lead; ``/`` commands act on the team;
    while a request is shown, a line answers it (``y``, ``n``, ``always`` or feedback)."""
    click.echo(
        "Type to talk to the lead; /status, /tasks, /watch, /approve ID, /reject ID FEEDBACK, "
        "/stop NAME, /goal [TEXT|clear], /quit. Requests are shown with their id: answer y, n, "
        "always or feedback.",
        err=True,
    )
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        if questions is not None and not line.startswith("/") and questions.answer(line):
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
            _answer(rt, line, questions)
        elif line == "/goal" or line.startswith("/goal "):
            _goal_command(rt, line[len("/goal") :].strip())
        else:
            rt.submit(line)


def _goal_command(rt: TeamRuntime, arg: str) -> None:
    """``/goal`` shows the lead's goal; ``/goal clear`` clears it; ``/goal TEXT`` sets it (an
    evaluator judges TEXT). Set and clear go through the lead's actor, which runs the judge."""
    import time

    from harness.goal import Goal

    if not arg:
        click.echo(safe(rt.goal.status().describe(time.time()), multiline=True))
    elif arg == "clear":
        rt.clear_goal()
        click.echo("goal cleared")
    else:
        rt.set_goal(Goal(condition=arg))
        click.echo(safe(f"goal set: {arg}"))


def _panel(rt: TeamRuntime, feed: LiveFeed | None) -> None:
    """``/watch``: the whole live view once (members, tasks, inboxes, jobs, cron, worktrees)."""
    from actors.cli.common import console
    from actors.live.view import LiveSource, render

    snap = feed.last if feed is not None else None
    console().print(render(snap if snap is not None else LiveSource(rt.team).load()))


def _answer(rt: TeamRuntime, line: str, questions: _Questions | None = None) -> None:
    """``/approve ID [note]`` or ``/reject ID feedback``: a plan or a permission request."""
    command, _, rest = line.partition(" ")
    request_id, _, note = rest.strip().partition(" ")
    approve = command == "/approve"
    questions = questions or _Questions(_Printer("text"), None, plans=True)
    questions.runtime = rt
    questions.decide(request_id, "y" if approve else (note or "n"), note=note)


HUMAN = "user"
"""Who answers at the console (as ``teamctl approve`` records it)."""
_YES, _NO, _ALWAYS = ("y", "yes"), ("n", "no"), ("a", "always")


class _Question:
    """A request shown at the console: a permission ask or a plan."""

    def __init__(self, row: ApprovalRow, rule: str) -> None:
        self.kind, self.request_id, self.agent = row.kind, row.request_id, row.agent
        self.rule = rule
        """The session rule ``always`` remembers (permissions)."""


class _Questions:
    """The requests waiting for the person at the console, from the live snapshots: each new
    one is shown (escaped) with its id and what answers it; a line typed while one is waiting
    answers the oldest. Answers go through the same journaled protocol as ``teamctl
    approve|reject``; a request answered elsewhere is dropped with a note."""

    def __init__(self, printer: _Printer, desk: HumanDesk | None, *, plans: bool) -> None:
        self.printer = printer
        self.desk = desk
        self.plans = plans
        """Plans are reviewed by the human (``approvals.plans``): show them."""
        self.runtime: TeamRuntime | None = None
        self._lock = threading.RLock()
        self._open: dict[str, _Question] = {}
        self._seen: set[str] = set()
        self._answered: set[str] = set()
        self._all_plans = False

    def __call__(self, snap: Snapshot) -> None:
        rows = [
            row
            for row in snap.approvals
            if (row.kind == "permission" and row.status == "requested")
            or (row.kind == "plan" and row.status == "submitted" and self.plans)
        ]
        with self._lock:
            now = {row.request_id for row in rows}
            for rid in [r for r in self._open if r not in now]:
                del self._open[rid]
                if rid not in self._answered:
                    self.printer.line(f"{rid} was answered elsewhere")
            fresh = [row for row in rows if row.request_id not in self._seen]
            if not fresh:
                return
            asks, plans = self._details()
            for row in fresh:
                self._seen.add(row.request_id)
                self._show(row, asks, plans)

    def _details(self) -> tuple[dict[str, PermissionRequested], dict[str, PlanRequest]]:
        """The journaled permission requests and plan requests still open, by request id."""
        from actors.board.protocols import pending_permissions

        rt = self.runtime
        if rt is None:
            return {}, {}
        state = rt.board.refresh()
        asks = {p.request_id: p for p in pending_permissions(rt.team.journal, state)}
        return asks, dict(state.plan_requests)

    def _show(
        self,
        row: ApprovalRow,
        asks: Mapping[str, PermissionRequested],
        plans: Mapping[str, PlanRequest],
    ) -> None:
        from actors.runtime.permission_requests import session_rule, shown_target
        from harness.tools.base import PermissionRequest

        if row.kind == "plan":
            if self._all_plans:
                self.decide(row.request_id, "always")
                return
            found_plan = plans.get(row.request_id)
            plan = (found_plan.plan if found_plan is not None else None) or ""
            self._open[row.request_id] = _Question(row, "")
            self.printer.line(
                safe(f"? {row.request_id}  {row.agent} submitted a plan for {row.about}:")
                + "\n"
                + safe("    " + plan.replace("\n", "\n    "), multiline=True)
                + "\n  y = approve · n = reject · always = approve every plan this session"
                " · other text = reject with it as feedback"
            )
            return
        found = asks.get(row.request_id)
        data = dict(found.input if found is not None else {})
        paths = tuple(str(x) for x in data.get("paths") or ())
        target = str(data.get("target") or ", ".join(paths) or "")
        kind = str(data.get("kind") or "other")
        access = cast("AccessKind", kind)
        request = PermissionRequest(row.about, access, target or None, paths)
        rule = session_rule(request)
        if self.runtime is not None:
            target = shown_target(request, self.runtime.repo_root)
        self._open[row.request_id] = _Question(row, rule)
        reason = found.reason if found is not None else ""
        what = f"{row.about} on {target}" if target else row.about
        self.printer.line(
            safe(f"? {row.request_id}  {row.agent} asks to use {what}: {reason}")
            + f"\n  y = allow · n = deny · always = allow {safe(rule)} for this session"
            + " · other text = deny with it as feedback"
        )

    def answer(self, line: str) -> bool:
        """Answer the oldest waiting request with ``line``; False when none waits."""
        with self._lock:
            if not self._open:
                return False
            rid = next(iter(self._open))
        self.decide(rid, line)
        return True

    def decide(self, request_id: str, reply: str, *, note: str = "") -> None:
        """Answer ``request_id``: ``y``, ``n``, ``always`` or feedback text (a refusal)."""
        word = reply.strip().lower()
        allow = word in _YES or word in _ALWAYS
        feedback = note if allow or word in _NO else reply.strip()
        with self._lock:
            question = self._open.get(request_id)
            self._answered.add(request_id)
        try:
            if request_id.startswith("plan-"):
                line = self._review(request_id, allow, feedback, always=word in _ALWAYS)
            else:
                rule = question.rule if question is not None and word in _ALWAYS else ""
                line = self._permit(request_id, allow, feedback, rule)
        except Exception as exc:  # a stale id or a typo at the console is not fatal
            with self._lock:
                self._answered.discard(request_id)
            click.echo(f"error: {exc}", err=True)
            return
        with self._lock:
            self._open.pop(request_id, None)
            waiting = next(iter(self._open.values()), None)
        self.printer.line(safe(line))
        if waiting is not None:
            self.printer.line(f"next: {waiting.request_id} from {waiting.agent} is waiting")

    def _permit(self, request_id: str, allow: bool, feedback: str, rule: str) -> str:
        from actors.board.protocols import ProtocolError, decide_permission

        rt = self._rt()
        if rule and self.desk is not None:
            self.desk.remember(rule)
            feedback = feedback or f"always: {rule} for this session"
        answer = decide_permission(rt.board, request_id, allow, by=HUMAN, reason=feedback)
        rt.decisions.notify(answer)
        if not answer.first:
            raise ProtocolError(
                f"permission request {request_id} was already decided: {answer.decision} "
                f"by {answer.by}"
            )
        verb = "allowed" if allow else "denied"
        extra = f" (and {rule} for this session)" if rule else ""
        why = f": {feedback}" if feedback and not allow else ""
        return f"{verb} {request_id}{extra}{why}"

    def _review(self, request_id: str, approve: bool, feedback: str, *, always: bool) -> str:
        from actors.protocols import review_plan

        if not approve and not feedback:
            feedback = "rejected at the console: revise the plan"
        review_plan(self._rt().services, request_id, approve, feedback, reviewer=HUMAN)
        if always:
            self._all_plans = True
        verb = "approved" if approve else "rejected"
        extra = " (and every plan for this session)" if always else ""
        why = f": {feedback}" if not approve else ""
        return f"{verb} plan {request_id}{extra}{why}"

    def _rt(self) -> TeamRuntime:
        if self.runtime is None:
            raise click.ClickException("the team is not running")
        return self.runtime


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
    approvals: str | None,
    script: Path | None,
    timeout: float | None,
    goal_text: str | None,
    goal_check: str | None,
    goal_max_blocks: int,
    fresh: bool,
) -> None:
    """Start the team (or continue it, paused members included) with PROMPT for the lead.
    With --goal / --goal-check the lead goes on until the goal holds (the README's "Goals")."""
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
            approvals=approvals,
            goal=_goal(goal_text, goal_check, goal_max_blocks),
        )
    )


@click.command("resume")
@_runtime_options(whole_team=True)
def resume_command(
    headless: bool,
    output_format: str,
    model: str | None,
    permission_mode: str | None,
    approvals: str | None,
    script: Path | None,
    timeout: float | None,
    goal_text: str | None,
    goal_check: str | None,
    goal_max_blocks: int,
) -> None:
    """Bring back every member that was not stopped (paused ones included), with its
    transcript, claim and mail; says whom it brought back. The lead's goal goes on (one
    given up at its cap is armed again), or --goal / --goal-check sets a new one."""
    sys.exit(
        _run(
            None,
            headless=headless,
            output_format=output_format,
            model=model,
            permission_mode=permission_mode,
            script=script,
            timeout=timeout,
            approvals=approvals,
            goal=_goal(goal_text, goal_check, goal_max_blocks),
        )
    )


@click.command("join")
@click.argument("name")
@click.option("--role", default=None, help="The role of a new teammate (default: general).")
@click.option(
    "--worktree-per-task",
    is_flag=True,
    help="Give each task it claims a worktree of its own (.worktrees/<task> on wt/<task>).",
)
@_runtime_options(whole_team=False)
@_mode
def join_command(
    name: str,
    role: str | None,
    worktree_per_task: bool,
    output_format: str,
    model: str | None,
    script: Path | None,
    permission_mode: str | None,
) -> None:
    """Host teammate NAME in this process, next to the team's runtime: a new teammate, or one
    on the team that no live process hosts. It claims tasks (in their worktrees), runs its
    background jobs and gets its cron jobs' firings; Ctrl-C pauses it (claim, conversation and
    mail kept) and `teamctl join NAME` again continues it."""
    from actors.runtime.runtime import TeamRuntime

    source = _model_source(script)
    settings = _settings(model, mode=permission_mode)
    _schedule(settings)
    if worktree_per_task:
        team = settings.team.model_copy(update={"worktree_per_task": True})
        settings = settings.model_copy(update={"team": team})
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    rt = TeamRuntime(
        model=source,
        settings=settings,
        on_event=_Printer(output_format),
        permission_mode=permission_mode,
        join=name,
        join_role=role,
    )
    code = EXIT_OK
    try:
        rt.start()
        click.echo(
            f"{name} joined the team, hosted here (Ctrl-C pauses it; `teamctl join {name}` "
            f"continues it; `teamctl stop {name}` retires it)",
            err=True,
        )
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
        _run_over.set()
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
