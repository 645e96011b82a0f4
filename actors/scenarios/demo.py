"""``teamctl demo``: the parallel-refactor scenario run with the live view, then what happened.

``run_demo`` copies the scenario's fixture into a fresh git repository, runs the real team runtime
on it with the scenario's scripted model (no API key; ``via_api`` goes through the local fake
Messages API and the real SDK), checks the scenario's expectations, and gathers a ``DemoReport``:
the tasks, who did what (tool calls per agent), the branches merged, the files changed (diffstat
against the fixture commit), the tokens each agent used, and where the repository is (kept) or
that it was removed.

``LiveFeed`` is the live view driven by runtime events: pass it (or call it from) a runtime's
``on_event``; every event marks the view stale and a drawing thread reloads a ``Snapshot`` from
the running team (``LiveSource(runtime.team)``) and shows it when it changed. Bursts of events
coalesce into one redraw; there is no timer. ``teamctl run`` uses it for its status panel.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.live.load import LiveSource

if TYPE_CHECKING:
    from actors.live.snapshot import Snapshot
    from actors.scenarios.check import Check

__all__ = ["DEMO_SCENARIO", "DemoReport", "LiveFeed", "run_demo"]

log = logging.getLogger(__name__)

DEMO_SCENARIO = "parallel-refactor"


class SnapshotSource(Protocol):
    """Where snapshots come from (``LiveSource``)."""

    def load(self) -> Snapshot:
        """The team now."""
        ...


class LiveFeed:
    """Show the running team's snapshot again after runtime events (see the module docstring).

    ``show`` runs on the feed's own thread, one call at a time; ``close`` draws the final
    snapshot on the caller's thread and stops the drawing thread.
    """

    def __init__(self, show: Callable[[Snapshot], None]) -> None:
        self._show = show
        self._source: SnapshotSource | None = None
        self._cond = threading.Condition()
        self._draw_lock = threading.Lock()
        self._stale = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.last: Snapshot | None = None
        """The snapshot shown last."""
        self.shown = 0
        """How many snapshots were shown."""

    def attach(self, source: SnapshotSource) -> None:
        """Start showing ``source`` (the first snapshot is drawn at once, on the feed's thread)."""
        with self._cond:
            if self._closed:
                return
            self._source = source
            self._stale = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="live-feed", daemon=True)
                self._thread.start()
            self._cond.notify()

    def __call__(self, event: Mapping[str, Any] | None = None) -> None:
        """A runtime event: the view is stale (cheap; safe from any thread)."""
        with self._cond:
            self._stale = True
            self._cond.notify()

    def close(self, *, final: bool = True) -> Snapshot | None:
        """Stop, drawing the final snapshot first if it changed (``final``, while the source's
        team is still open); returns the last one shown. Idempotent."""
        with self._cond:
            if self._closed:
                return self.last
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
        if final:
            self._draw()
        return self.last

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stale and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._stale = False
            self._draw()

    def _draw(self) -> None:
        with self._draw_lock:
            source = self._source
            if source is None:
                return
            try:
                snap = source.load()
            except Exception as exc:  # a view must never break the team it shows
                log.warning("live view: %s", exc)
                return
            if snap == self.last:
                return
            self.last = snap
            self.shown += 1
            try:
                self._show(snap)
            except BrokenPipeError:
                self._source = None  # the reader went away: stop drawing, quietly
            except Exception as exc:
                log.warning("live view: %s", exc)


@dataclass(frozen=True)
class AgentSummary:
    """What one agent did."""

    name: str
    role: str
    tasks: tuple[str, ...]
    """Tasks it completed."""
    tools: dict[str, int]
    """Tool calls by tool name."""
    tokens: int

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "tasks": list(self.tasks),
            "tools": dict(self.tools),
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class DemoReport:
    """What ``run_demo`` saw."""

    ok: bool
    idle: bool
    seconds: float
    via_api: bool
    latency_ms: int
    tasks: tuple[dict[str, Any], ...]
    agents: tuple[AgentSummary, ...]
    merges: tuple[dict[str, Any], ...]
    files: tuple[dict[str, Any], ...]
    """``{"path", "added", "removed"}`` per file changed on the base branch since the fixture."""
    diffstat: str
    checks: tuple[Check, ...]
    repo: Path | None = None
    """The kept repository (None: it was removed)."""
    snapshots: int = 0
    """Live-view snapshots shown."""
    notes: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": DEMO_SCENARIO,
            "ok": self.ok,
            "idle": self.idle,
            "seconds": round(self.seconds, 3),
            "via_api": self.via_api,
            "latency_ms": self.latency_ms,
            "tasks": list(self.tasks),
            "agents": [a.as_json() for a in self.agents],
            "merges": list(self.merges),
            "files": list(self.files),
            "diffstat": self.diffstat,
            "checks": [c.as_json() for c in self.checks],
            "repo": str(self.repo) if self.repo else None,
            "snapshots": self.snapshots,
        }


@dataclass
class _Seen:
    """What the demo collects from the runtime before it stops."""

    tokens: dict[str, int] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    state: Any = None
    merges: list[dict[str, Any]] = field(default_factory=list)


def run_demo(
    *,
    keep: bool = False,
    latency_ms: int = 0,
    via_api: bool = False,
    show: Callable[[Snapshot], None] | None = None,
    workdir: Path | None = None,
    timeout_s: float | None = None,
) -> DemoReport:
    """Run the demo scenario (``show`` receives each live-view snapshot) and report on it."""
    from actors.scenarios.check import check_all
    from actors.scenarios.model import find_scenario
    from actors.scenarios.run import RunHooks, execute

    scenario = find_scenario(DEMO_SCENARIO)
    feed = LiveFeed(show) if show is not None else None
    seen = _Seen()

    def on_start(rt: Any) -> None:
        if feed is not None:
            feed.attach(LiveSource(rt.team))

    def before_stop(rt: Any) -> None:
        if feed is not None:
            feed.close()
        for view in rt.services.members():
            seen.tokens[view.name] = view.tokens_used
            seen.roles[view.name] = view.role
        seen.state = rt.board.refresh()
        journal = rt.team.journal.read_from(1)
        seen.merges = [dict(e.data) for e in journal if e.type == "worktree.merged"]

    hooks = RunHooks(
        on_event=feed, on_start=on_start, before_stop=before_stop, latency_ms=latency_ms
    )
    tmp = Path(tempfile.mkdtemp(prefix="teamctl-demo-", dir=workdir)).resolve()
    root = tmp / "repo"
    started = time.monotonic()
    try:
        outcome = execute(
            scenario, root, via_api=via_api, timeout_s=timeout_s or scenario.timeout_s, hooks=hooks
        )
        checks = tuple(check_all(scenario, outcome))
        files, diffstat = _changes(root)
        report = DemoReport(
            ok=outcome.idle and all(c.ok for c in checks),
            idle=outcome.idle,
            seconds=time.monotonic() - started,
            via_api=via_api,
            latency_ms=latency_ms,
            tasks=_tasks(seen.state),
            agents=_agents(seen, outcome.events),
            merges=tuple(_merge_row(seen.state, m) for m in seen.merges),
            files=files,
            diffstat=diffstat,
            checks=checks,
            repo=root if keep else None,
            snapshots=feed.shown if feed is not None else 0,
        )
    finally:
        if feed is not None:
            feed.close(final=False)  # normally closed already, before the runtime stopped
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _tasks(state: Any) -> tuple[dict[str, Any], ...]:
    if state is None:
        return ()
    return tuple(
        {
            "id": t.id,
            "subject": t.subject,
            "status": t.status,
            "owner": t.owner,
            "worktree": t.worktree,
            "summary": t.summary,
        }
        for t in state.tasks.values()
        if t.status != "deleted"
    )


def _agents(seen: _Seen, events: list[dict[str, Any]]) -> tuple[AgentSummary, ...]:
    calls: dict[str, Counter[str]] = {}
    for event in events:
        if event.get("type") == "tool_use":
            calls.setdefault(str(event["agent"]), Counter())[str(event["name"])] += 1
    done: dict[str, list[str]] = {}
    if seen.state is not None:
        for task in seen.state.tasks.values():
            if task.status == "completed" and task.owner:
                done.setdefault(task.owner, []).append(task.id)
    names = list(seen.tokens) or sorted(calls)
    return tuple(
        AgentSummary(
            name=name,
            role=seen.roles.get(name, ""),
            tasks=tuple(done.get(name, ())),
            tools=dict(sorted(calls.get(name, Counter()).items())),
            tokens=seen.tokens.get(name, 0),
        )
        for name in names
        if name in calls or name in seen.tokens
    )


def _merge_row(state: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    name = str(data.get("name"))
    record = state.worktrees.get(name) if state is not None else None
    return {
        "name": name,
        "branch": record.branch if record is not None else f"wt/{name}",
        "task_id": record.task_id if record is not None else None,
        "into": data.get("into"),
        "commit": data.get("commit"),
    }


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.stdout if proc.returncode == 0 else ""


def _changes(root: Path) -> tuple[tuple[dict[str, Any], ...], str]:
    """Files changed on the checked-out branch since the fixture commit, and the diffstat."""
    first = _git(root, "rev-list", "--max-parents=0", "HEAD").split()
    if not first:
        return (), ""
    base = first[-1]
    files = []
    for line in _git(root, "diff", "--numstat", base, "HEAD").splitlines():
        added, removed, path = line.split("\t", 2)
        files.append(
            {
                "path": path,
                "added": int(added) if added.isdigit() else 0,
                "removed": int(removed) if removed.isdigit() else 0,
            }
        )
    return tuple(files), _git(root, "diff", "--stat", base, "HEAD").rstrip()
