"""Team-wide commands: ``init`` and ``status``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from actors.cli.common import echo_json, json_option, show, team_session, text_table

if TYPE_CHECKING:
    from actors.board.state import TeamState
    from actors.factory import Team


@click.command()
@click.option("--name", default=None, help="Team name (default: the repository folder name).")
@click.option(
    "--backend",
    default=None,
    metavar="file|nats://HOST:PORT[,HOST:PORT...]/TEAM",
    help="Where the team lives (default: $TEAMCTL_BACKEND, else the settings file's, else "
    "file); recorded in .team/settings.json. A team already on the cluster is joined.",
)
@click.option(
    "--import",
    "import_from",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Start the team from this journal.jsonl (`teamctl journal export` writes one); "
    "refused when the team already has events.",
)
def init(name: str | None, backend: str | None, import_from: Path | None) -> None:
    """Create `.team/` in this repository (safe to run again), or connect it to a team on a
    JetStream cluster."""
    from actors.factory import init_team

    report = init_team(name=name, backend=backend, import_from=import_from)
    where = report.repo.team_dir if report.backend == "file" else report.backend
    if report.joined is not None:
        click.echo(f"connected to existing team {report.name} ({report.joined} events) on {where}")
    elif report.imported is not None:
        click.echo(f"imported team {report.name!r} ({report.imported} events) into {where}")
    elif report.created:
        click.echo(f"initialised team {report.name!r} in {where}")
    else:
        click.echo(f"team {report.name!r} already initialised in {where}")
    for line in report.created:
        click.echo(f"  created {line}")
    if report.backend == "file":  # remembered clean, so the first `status` needs no check
        problem = _settings_problem(report.repo.settings_path)
        if problem:
            click.echo(f"warning: {problem}", err=True)


SETTINGS_CHECKED = "settings.ok"
"""In ``.team/``: what the last clean settings check of ``status`` depended on (docs/
ARCHITECTURE.md, "Start-up and benchmarks")."""

_SETTINGS_ENV_PREFIXES = ("TEAMCTL_", "CLAUDE_")


def _stat(path: str) -> list[int] | None:
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _fingerprint(settings: list[str], code: list[str]) -> str:
    """A hash of what a settings check depends on: the settings files of every scope (present
    or not), the modules that checked them, and the environment that picks the files."""
    import hashlib
    import json
    import os

    env = sorted(
        (k, v) for k, v in os.environ.items() if k == "HOME" or k.startswith(_SETTINGS_ENV_PREFIXES)
    )
    seen = [env, [(p, _stat(p)) for p in settings], [(p, _stat(p)) for p in code]]
    return hashlib.sha256(json.dumps(seen).encode("utf-8")).hexdigest()


def _settings_problem(path: Path) -> str | None:
    """What is wrong with the team's merged settings (None: nothing). A clean check is
    remembered in ``.team/settings.ok`` with what it depended on, so that ``status`` loads the
    settings models (pydantic) again only when a settings file, the environment choosing them or
    teamctl itself changed."""
    import json

    record = path.parent / SETTINGS_CHECKED
    try:
        known = json.loads(record.read_bytes())
        if known["fingerprint"] == _fingerprint(known["settings"], known["code"]):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    import os
    import sys

    from actors.settings import SettingsError, load_settings
    from harness.settings import settings_files

    root = path.parent.parent if path.parent.name == ".team" else None
    files = [str(f.path) for f in settings_files(root, path, os.environ)]
    before = [_stat(p) for p in files]
    try:
        load_settings(path)
    except SettingsError as exc:
        return str(exc)
    from actors.cli.main import OUR_PACKAGES as ours

    code = sorted(  # our modules, and pydantic's version (another pydantic may judge otherwise)
        str(module.__file__)
        for name, module in list(sys.modules.items())
        if (name.split(".")[0] in ours or name in ("pydantic.version", "pydantic_core"))
        and getattr(module, "__file__", None)
    )
    if [_stat(p) for p in files] == before:  # not changed while it was checked
        fingerprint = _fingerprint(files, code)
        _remember(record, {"settings": files, "code": code, "fingerprint": fingerprint})
    return None


def _remember(record: Path, value: dict[str, Any]) -> None:
    """Write ``record`` whole (a temporary file renamed over it); a failure only costs the next
    ``status`` a full check."""
    import contextlib
    import json
    import os

    tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(value), encoding="utf-8")
        os.replace(tmp, record)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _pending(team: Team, state: TeamState) -> list[dict[str, Any]]:
    """Requests waiting for an answer, oldest first: permission asks (``permission.requested``
    with no decision) and submitted plans. ``waiting_s``: since when they wait."""
    import time

    from actors.board.protocols import open_permission_events

    root = str(team.repo.root) + "/"
    asks: list[dict[str, Any]] = []
    for event in open_permission_events(team.journal, state):
        data = event.data.get("input") or {}
        target = data.get("target") or ", ".join(data.get("paths") or ())
        if isinstance(target, str) and target.startswith(root):
            target = target[len(root) :]
        asks.append(
            {
                "request_id": str(event.data.get("request_id", "")),
                "kind": "permission",
                "who": event.data.get("agent"),
                "what": f"{event.data.get('tool')} {target}".strip(),
                "since": event.ts,
            }
        )
    plans: list[dict[str, Any]] = [
        {
            "request_id": r.request_id,
            "kind": "plan",
            "who": r.teammate,
            "what": f"plan for {r.task_id}",
            "since": r.requested_at,
        }
        for r in state.plan_requests.values()
        if r.status == "submitted"
    ]
    now = time.time()
    rows = sorted([*asks, *plans], key=lambda row: row["since"])
    for row in rows:
        row["waiting_s"] = round(max(0.0, now - row.pop("since")), 1)
    return rows


def _usage(state: TeamState, name: str) -> dict[str, Any]:
    """A member's model usage for ``status`` (``teamctl cost`` has the details)."""
    from actors.board.state import NO_USAGE

    used = state.agent_usage.get(name, NO_USAGE)
    return {"tokens": used.tokens, "cost_usd": used.cost_usd}


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


@click.command()
@json_option
def status(as_json: bool) -> None:
    """Tasks by state, members (with their tokens and cost), requests waiting for an answer
    and inbox counts."""
    with team_session(read_only=True) as team:
        state = team.state()
        counts: dict[str, int] = {}
        for task in state.tasks.values():
            counts[task.status] = counts.get(task.status, 0) + 1
        ready = len(state.ready())
        members = [
            {
                "name": m.name,
                "kind": m.kind,
                "role": m.role,
                "status": m.status,
                **_usage(state, m.name),
            }
            for m in state.members.values()
        ]
        inboxes = team.inbox_counts()
        pending = _pending(team, state)
        settings_problem = _settings_problem(team.repo.settings_path)
    if settings_problem:
        click.echo(f"warning: {settings_problem}", err=True)
    if as_json:
        echo_json(
            {
                "team": state.name,
                "seq": state.seq,
                "tasks": {**counts, "ready": ready},
                "members": members,
                "usage": state.usage.as_json(),
                "pending": pending,
                "inboxes": inboxes,
            }
        )
        return
    click.echo(f"team {state.name!r} — journal at seq {state.seq}")
    order = ("pending", "in_progress", "completed", "deleted")
    summary = ", ".join(f"{s.replace('_', ' ')} {counts.get(s, 0)}" for s in order)
    click.echo(f"tasks: {summary} (ready {ready})")
    used = state.usage
    click.echo(
        f"model usage: {used.calls} calls, {used.tokens:,} tokens, ${used.cost_usd:.4f} "
        "(`teamctl cost` by agent and task)"
    )
    if members:
        grid = text_table("members", ("name", "kind", "role", "status", "tokens", "cost"))
        for m in members:
            tokens, cost = f"{m['tokens']:,}", f"${m['cost_usd']:.4f}"
            grid.add_row(m["name"], m["kind"], m["role"] or "-", m["status"], tokens, cost)
        show(grid)
    else:
        click.echo("members: none yet")
    if pending:
        grid = text_table("waiting for an answer", ("request", "who", "what", "waiting"))
        for row in pending:
            grid.add_row(row["request_id"], str(row["who"]), row["what"], _age(row["waiting_s"]))
        show(grid)
        click.echo("answer with `teamctl approve ID` or `teamctl reject ID --feedback TEXT`")
    grid = text_table("inboxes", ("agent", "unread"))
    for agent, unread in inboxes.items():
        grid.add_row(agent, str(unread))
    show(grid)


@click.command()
@click.option(
    "--monitor",
    metavar="http://HOST:PORT",
    default=None,
    help="A JetStream server's monitoring endpoint (its http_port), to check that it syncs "
    "every write (sync_interval: always).",
)
@json_option
def doctor(monitor: str | None, as_json: bool) -> None:
    """Check where the team lives: on JetStream the server version (2.12 or newer), the
    replicas of the team's streams against the cluster size, and whether every write is synced
    (needs --monitor); on files the journal. Exit 1 when a check fails."""
    from actors.repo import find_team
    from actors.settings import team_backend

    repo = find_team()
    backend = team_backend(repo.settings_path)
    if backend is None:
        value, checks = "file", _file_checks()
    else:
        value = "nats://{}/{}".format(
            ",".join(s.removeprefix("nats://") for s in backend.servers), backend.team
        )
        checks = _nats_checks(backend.servers, backend.team, monitor)
    problem = _settings_problem(repo.settings_path)
    checks.append(("settings", "fail" if problem else "ok", problem or "valid"))
    failed = any(status == "fail" for _, status, _ in checks)
    if as_json:
        echo_json(
            {
                "backend": value,
                "ok": not failed,
                "checks": [{"check": c, "status": st, "detail": d} for c, st, d in checks],
            }
        )
    else:
        click.echo(f"backend {value}")
        for check, status, detail in checks:
            click.echo(f"  {status.upper():<7} {check}: {detail}")
    if failed:
        raise click.exceptions.Exit(1)


Check = tuple[str, str, str]
"""``(check, status, detail)``; status ``ok``, ``fail`` or ``unknown``."""


def _file_checks() -> list[Check]:
    from actors.factory import check_team_journal

    report = check_team_journal()
    if report.ok:
        return [("journal", "ok", f"{report.lines} events, last seq {report.last_seq}")]
    status = "ok" if report.repairable else "fail"
    detail = f"line {report.problem_line}: {report.problem} (`teamctl journal check`)"
    return [("journal", status, detail)]


def _nats_checks(servers: tuple[str, ...], team: str, monitor: str | None) -> list[Check]:
    from mailboxes.nats_info import min_version_text, probe

    report = probe(servers, team, monitor=monitor)
    checks: list[Check] = []
    if report.too_old:
        return [("server", "fail", report.too_old_message())]
    checks.append(
        (
            "server",
            "ok",
            f"nats-server {report.version} at {report.url} ({min_version_text()} or newer needed)",
        )
    )
    if report.journal_events is None:
        checks.append(
            ("team", "fail", f"no stream {report.journal} on the cluster: run `teamctl init`")
        )
    else:
        checks.append(
            ("team", "ok", f"journal stream {report.journal}, {report.journal_events} messages")
        )
    size = report.cluster_size
    servers_text = f"{size} server{'s' if size != 1 else ''}"
    for stream in report.streams:
        wanted = report.wanted_replicas
        status = "ok" if stream.replicas >= wanted else "fail"
        checks.append(
            (
                "replicas",
                status,
                f"{stream.name}: {stream.replicas} replica(s), cluster of {servers_text} "
                f"({wanted} wanted)",
            )
        )
    if report.sync_always is None:
        hint = "" if monitor else "; pass --monitor http://HOST:PORT (the server's http_port)"
        checks.append(("sync", "unknown", f"{report.sync_detail}{hint}"))
    else:
        checks.append(("sync", "ok" if report.sync_always else "fail", report.sync_detail))
    return checks


COMMANDS = (init, status, doctor)  # `teamctl settings` is in actors/cli/settings_cmd.py
