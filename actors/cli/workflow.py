"""``teamctl workflow``: list, run, resume and inspect workflows (docs/ARCHITECTURE.md,
"Workflows").

``run`` and ``resume`` host the team like ``teamctl run --headless``: they start a
``TeamRuntime`` in this process (the lead and every teammate that was not stopped come back, so a
run killed mid-way is continued by whoever held its steps), drive the workflow engine on an
asyncio loop in the main thread while the team's actors work its steps, retire the workers the run
spawned, and stop the runtime (the team paused). Progress lines go to stderr; ``--json`` prints
one object ``{"run_id", "status", "result"}`` on stdout. Exit code 0 when the run completed, 1
when it failed (the error on stderr), 2 for bad usage (``--args`` not JSON).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, json_option, team_session
from teamctl_base.text import safe

if TYPE_CHECKING:
    from actors.workflows.engine import RunOutcome, WorkflowEngine

_script = click.option(
    "--script",
    "script",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="TEAMCTL_SCRIPT",
    hidden=True,
    help="Play a scripted model from this YAML/JSON file instead of calling an API.",
)
_model = click.option("--model", default=None, help="Model for every agent (overrides settings).")


@click.group("workflow")
def workflow_group() -> None:
    """Saved multi-agent scripts: their steps are tasks the team works, recorded and
    resumable."""


@workflow_group.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The workflows of .team/workflows/ and the packaged examples."""
    from actors.workflows.loader import Workflow, list_workflows

    with team_session(read_only=True) as team:
        found = list_workflows(team.repo.root)
    rows: list[dict[str, Any]] = []
    for item in found:
        if isinstance(item, Workflow):
            rows.append(
                {
                    "name": item.name,
                    "description": item.description,
                    "phases": list(item.phases),
                    "file": str(item.path),
                }
            )
        else:
            rows.append({"error": str(item)})
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        if "error" in row:
            click.echo(safe(f"error: {row['error']}"), err=True)
            continue
        phases = f" [{', '.join(row['phases'])}]" if row["phases"] else ""
        click.echo(safe(f"{row['name']}: {row['description']}{phases}"))


def _parse_args(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"not JSON: {exc.msg} at char {exc.pos}", param_hint="--args"
        ) from None


def _progress(line: str) -> None:
    click.echo(safe(f"workflow: {line}"), err=True)


def _hosted(script: Path | None, model: str | None, work: Any) -> RunOutcome:
    """Start the team runtime, run ``work(engine)``, retire the workers the run spawned, stop."""
    from actors.cli.run import _model_source, _settings
    from actors.runtime.runtime import TeamRuntime
    from actors.workflows.engine import WorkflowEngine

    source = _model_source(script)
    settings = _settings(model)
    rt = TeamRuntime(model=source, settings=settings, resume_workflows=False)
    try:
        rt.start()

        def abort() -> str | None:
            failed = rt.failures()
            if failed:
                name, error = next(iter(failed.items()))
                return f"{name} failed: {error}"
            cap = rt.cap_reached()
            return f"cap reached: {cap.reason}" if cap is not None else None

        engine = WorkflowEngine(rt.services, actor="cli", progress=_progress, abort=abort)
        outcome: RunOutcome = work(engine)
        for name in outcome.spawned:  # the run's own workers: retired (claims are done)
            rt.hosting.stop_member(name, "workflow_done", timeout_s=10.0)
        return outcome
    finally:
        rt.stop("run_ended")


def _report(outcome: RunOutcome, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(outcome.as_json(), ensure_ascii=False))
    elif outcome.status == "completed":
        click.echo(f"workflow run {outcome.run_id} completed")
        click.echo(safe(json.dumps(outcome.result, indent=2, ensure_ascii=False), multiline=True))
    if outcome.status != "completed":
        click.echo(safe(f"error: workflow run {outcome.run_id} failed: {outcome.error}"), err=True)
        raise SystemExit(1)


@workflow_group.command("run")
@click.argument("name")
@click.option("--args", "raw_args", default=None, help="The workflow's args, as JSON.")
@json_option
@_model
@_script
def run_command(
    name: str, raw_args: str | None, as_json: bool, model: str | None, script: Path | None
) -> None:
    """Run workflow NAME on the team until it finishes."""
    from actors.workflows.loader import find_workflow, load_workflow

    args = _parse_args(raw_args)
    with team_session(read_only=True) as team:
        load_workflow(find_workflow(team.repo.root, name))  # a bad file: before anything starts

    def work(engine: WorkflowEngine) -> RunOutcome:
        return engine.start(name, args)

    _report(_hosted(script, model, work), as_json)


@workflow_group.command("resume")
@click.argument("run_id")
@json_option
@_model
@_script
def resume_command(run_id: str, as_json: bool, model: str | None, script: Path | None) -> None:
    """Run RUN_ID again: recorded steps answer from the journal, only the others run."""
    from actors.workflows.engine import read_runs
    from actors.workflows.loader import WorkflowError

    with team_session(read_only=True) as team:
        run = read_runs(team.journal).get(run_id)
    if run is None:
        raise WorkflowError(f"no workflow run {run_id!r} (`teamctl workflow runs` lists them)")
    if run.status == "completed":
        raise WorkflowError(f"workflow run {run_id} already completed: nothing to resume")

    def work(engine: WorkflowEngine) -> RunOutcome:
        return engine.resume(run_id)

    _report(_hosted(script, model, work), as_json)


def _run_rows() -> list[dict[str, Any]]:
    from actors.workflows.engine import read_runs

    with team_session(read_only=True) as team:
        runs = read_runs(team.journal)
        state = team.board.refresh()
    rows = []
    for run in runs.values():
        keys = set(run.steps)
        cost = 0.0
        for task in state.tasks.values():
            meta = task.metadata.get("workflow")
            if not isinstance(meta, dict) or meta.get("run_id") != run.run_id:
                continue
            keys.add(str(meta.get("key")))
            usage = state.task_usage.get(task.id)
            if usage is not None:
                cost += usage.cost_usd
        rows.append(
            {
                "run_id": run.run_id,
                "name": run.name,
                "status": run.status,
                "steps_done": len(run.steps),
                "steps_total": len(keys),
                "cost_usd": round(cost, 6),
                "args": run.args,
                "phase": run.phase,
                "result": run.result,
                "error": run.error,
                "file": run.file,
            }
        )
    return rows


@workflow_group.command("runs")
@json_option
def runs_command(as_json: bool) -> None:
    """Every workflow run: id, name, status, steps done/total, cost."""
    rows = _run_rows()
    if as_json:
        echo_json(
            [
                {k: r[k] for k in ("run_id", "name", "status", "steps_done", "steps_total")}
                | {"cost_usd": r["cost_usd"]}
                for r in rows
            ]
        )
        return
    for r in rows:
        click.echo(
            safe(
                f"{r['run_id']}  {r['name']}  {r['status']}  "
                f"steps {r['steps_done']}/{r['steps_total']}  ${r['cost_usd']:.4f}"
            )
        )


@workflow_group.command("show")
@click.argument("run_id")
@json_option
def show_command(run_id: str, as_json: bool) -> None:
    """One run: its args, phase, steps, result or error."""
    from actors.workflows.loader import WorkflowError

    row = next((r for r in _run_rows() if r["run_id"] == run_id), None)
    if row is None:
        raise WorkflowError(f"no workflow run {run_id!r} (`teamctl workflow runs` lists them)")
    if as_json:
        echo_json(row)
        return
    for key, value in row.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        click.echo(safe(f"{key}: {text}", multiline=True))


COMMANDS = (workflow_group,)
