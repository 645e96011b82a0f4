"""Running a scenario: a fresh git repository from the fixture, the real team runtime driven by
the scripted model (in process, or through the fake Messages API and the real ``anthropic`` SDK),
then every expectation checked (``actors.scenarios.check``).

The team gets the scenario's ``prompt`` (with its ``goal``, the lead pursues it as with
``teamctl run --goal/--goal-check``), or runs its ``workflow`` through the workflow engine as
``teamctl workflow run`` does: the steps become tasks, workers are spawned, retired at the end.

Usage::

    result = run_scenario(find_scenario("idle-claimers"), via_api=False, keep=False)
    result.ok            # every check passed (a skipped scenario is not ok)
    result.checks        # one ``Check`` per expectation
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.scenarios.check import Check, RunOutcome, check_all
from actors.scenarios.model import Capability, Scenario
from teamctl_base.clock import SystemClock

__all__ = ["RunHooks", "ScenarioResult", "capabilities", "execute", "run_scenario"]

_GIT = ("git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")


@dataclass(frozen=True)
class RunHooks:
    """Optional ways into a run (``teamctl demo`` shows its live view through them)."""

    on_event: Callable[[Mapping[str, Any]], None] | None = None
    """Told every runtime event too (from the runtime's threads)."""
    on_start: Callable[[Any], None] | None = None
    """Called with the started ``TeamRuntime``, before the prompt is submitted."""
    before_stop: Callable[[Any], None] | None = None
    """Called with the ``TeamRuntime`` once the run is over (idle or timed out), before it stops."""
    latency_ms: int | None = None
    """Replaces the script's latency per model call."""


NO_HOOKS = RunHooks()


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of ``run_scenario``."""

    name: str
    via_api: bool
    checks: tuple[Check, ...] = ()
    seconds: float = 0.0
    repo: Path | None = None
    """The repository, when kept."""
    skipped: str | None = None
    """Why the scenario did not run (a missing capability)."""

    @property
    def ok(self) -> bool:
        return self.skipped is None and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.name,
            "via_api": self.via_api,
            "ok": self.ok,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
            "repo": str(self.repo) if self.repo else None,
            "checks": [c.as_json() for c in self.checks],
        }


def capabilities() -> frozenset[Capability]:
    """What the runtime supports now (a scenario ``requires`` a subset): ``worktrees`` when the
    lead of a runtime with worktrees gets ``create_worktree`` and ``merge_worktree`` and git is
    installed."""
    from actors.tools.toolsets import WORKTREE_TOOL_NAMES

    found: set[Capability] = set()
    wanted = {"create_worktree", "merge_worktree"}
    if wanted <= set(WORKTREE_TOOL_NAMES) and shutil.which("git") is not None:
        found.add("worktrees")
    return frozenset(found)


class _OffsetClock(SystemClock):
    """The real clock with its wall time ``offset_s`` ahead (the scheduler sees the next cron
    slot as due)."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def now(self) -> float:
        return super().now() + self.offset_s


class _Events:
    """Collects runtime events (thread-safe)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self.items.append(dict(event))

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.items)


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run git in ``root`` with hooks off (raises on failure)."""
    return subprocess.run(
        [*_GIT, *args], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )


def prepare_repo(scenario: Scenario, root: Path) -> None:
    """Fixture → fresh git repository on ``main`` with one commit; ``teamctl init``; settings
    merged; setup tasks created."""
    from actors.factory import init_team, open_team
    from actors.settings import Settings, merge

    shutil.copytree(scenario.repo_dir, root, ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "teamctl scenario")
    git(root, "config", "user.email", "scenario@teamctl.invalid")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"fixture of scenario {scenario.name}")
    if scenario.changes_dir.is_dir():  # uncommitted changes on top of the fixture
        shutil.copytree(
            scenario.changes_dir,
            root,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    report = init_team(root, name=scenario.name)
    settings = merge(Settings().to_json(), scenario.settings)
    report.repo.settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    if scenario.setup.tasks:
        with open_team(root) as team:
            for task in scenario.setup.tasks:
                team.board.create(
                    task.subject,
                    task.description,
                    blocked_by=task.blocked_by,
                    plan_required=task.plan_required,
                    role=task.role,
                )


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _settle(rt: Any, deadline: float) -> bool:
    """Wait until the team is idle twice in a row: ``is_idle`` reads the inboxes before the
    jobs, so a job that ends and notifies between the two reads can look idle once."""
    while True:
        if not rt.wait_idle(max(0.0, deadline - time.monotonic())):
            return False
        if rt.is_idle():
            return True


def _run_workflow(rt: Any, scenario: Scenario, deadline: float) -> dict[str, Any]:
    """Run the scenario's workflow on the started team as ``teamctl workflow run`` does; its
    outcome as JSON (``run_id``, ``status``, ``result``, ``error``, ``cached``)."""
    from actors.errors import TeamError
    from actors.workflows.engine import WorkflowEngine

    spec = scenario.workflow
    assert spec is not None

    def abort() -> str | None:
        failed = rt.failures()
        if failed:
            name, error = next(iter(failed.items()))
            return f"{name} failed: {error}"
        cap = rt.cap_reached()
        if cap is not None:
            return f"cap reached: {cap.reason}"
        if time.monotonic() > deadline:
            return f"not finished within the scenario's {scenario.timeout_s:g}s"
        return None

    engine = WorkflowEngine(rt.services, actor="cli", abort=abort)
    try:
        outcome = engine.start(spec.name, spec.args)
    except TeamError as exc:  # a bad workflow file: nothing ran
        return {"run_id": None, "status": "failed", "result": None, "error": str(exc)}
    for name in outcome.spawned:  # the run's own workers: retired (their claims are done)
        rt.hosting.stop_member(name, "workflow_done", timeout_s=10.0)
    return {**outcome.as_json(), "error": outcome.error, "cached": outcome.cached}


def _drive(
    scenario: Scenario,
    root: Path,
    model: Any,
    events: _Events,
    timeout_s: float,
    hooks: RunHooks = NO_HOOKS,
) -> tuple[bool, float, dict[str, Any] | None]:
    """Run the team until idle (or the limit); True when it went idle, and the workflow's
    outcome (a ``workflow`` scenario)."""
    from actors.runtime.runtime import TeamRuntime
    from harness.goal import Goal

    offset = scenario.clock_offset_s
    started = time.monotonic()
    deadline = started + timeout_s
    tap = hooks.on_event

    def on_event(event: Mapping[str, Any]) -> None:
        events(event)
        if tap is not None:
            tap(event)

    cron_clock = _OffsetClock(offset) if offset else None
    goal = None
    if scenario.goal is not None:
        goal = Goal(
            condition=scenario.goal.condition,
            check=scenario.goal.check,
            max_blocks=scenario.goal.max_blocks,
        )
    rt = TeamRuntime(root, model=model, on_event=on_event, cron_clock=cron_clock, goal=goal)
    idle = False
    workflow = None
    try:
        rt.start()
        if hooks.on_start is not None:
            hooks.on_start(rt)
        if scenario.workflow is not None:
            workflow = _run_workflow(rt, scenario, deadline)
        else:
            assert scenario.prompt is not None
            rt.submit(scenario.prompt)
        idle = _settle(rt, deadline)
        if hooks.before_stop is not None:
            hooks.before_stop(rt)
    finally:
        rt.stop()
    return idle, time.monotonic() - started, workflow


def execute(
    scenario: Scenario,
    root: Path,
    *,
    via_api: bool,
    timeout_s: float,
    hooks: RunHooks = NO_HOOKS,
) -> RunOutcome:
    """Prepare ``root`` and run the team on it (scripted model in process, or through the API)."""
    from harness.model.scripted import ScriptedModel

    prepare_repo(scenario, root)
    script = scenario.script
    if hooks.latency_ms is not None:
        script = script.model_copy(update={"latency_ms": hooks.latency_ms})
    scripted = ScriptedModel(script)
    events = _Events()
    script_errors: list[str] = []
    # ``python`` in a scenario (its commands, its agents' shells) is this interpreter.
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    if via_api:
        from harness.model.fakeapi import FakeMessagesServer

        with FakeMessagesServer(scripted) as server:
            env = {
                "ANTHROPIC_BASE_URL": server.base_url,
                "ANTHROPIC_API_KEY": "fake-api-key",
                "PATH": path,
            }
            with _environ(env):
                idle, seconds, workflow = _drive(scenario, root, None, events, timeout_s, hooks)
            script_errors = list(server.script_errors)
    else:
        with _environ({"PATH": path}):
            idle, seconds, workflow = _drive(scenario, root, scripted, events, timeout_s, hooks)
    return RunOutcome(
        root=root,
        idle=idle,
        seconds=seconds,
        events=events.snapshot(),
        unconsumed=scripted.unconsumed(),
        script_errors=script_errors,
        workflow=workflow,
    )


def run_scenario(
    scenario: Scenario,
    *,
    via_api: bool = False,
    keep: bool = False,
    timeout_s: float | None = None,
    workdir: Path | None = None,
    available: frozenset[Capability] | None = None,
) -> ScenarioResult:
    """Run ``scenario`` in a fresh temporary repository (under ``workdir``, default the system
    temporary folder) and check every expectation. The repository is removed afterwards unless
    ``keep``. A scenario that ``requires`` a capability missing from ``available`` (default:
    ``capabilities()``) is skipped."""
    have = capabilities() if available is None else available
    missing = sorted(set(scenario.requires) - have)
    if missing:
        return ScenarioResult(
            scenario.name,
            via_api,
            skipped=f"needs runtime support for {', '.join(missing)}, which is not built yet",
        )
    tmp = Path(tempfile.mkdtemp(prefix=f"teamctl-{scenario.name}-", dir=workdir)).resolve()
    root = tmp / "repo"
    started = time.monotonic()
    try:
        outcome = execute(
            scenario, root, via_api=via_api, timeout_s=timeout_s or scenario.timeout_s
        )
        checks = check_all(scenario, outcome)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return ScenarioResult(
        scenario.name,
        via_api,
        checks=tuple(checks),
        seconds=time.monotonic() - started,
        repo=root if keep else None,
    )
