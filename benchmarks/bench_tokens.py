"""Token economy: scripted workloads run end to end by a team and by one solo agent.

Each workload (``benchmarks/workloads/*.yaml``) is run twice in fresh git repositories: by the team
(``teamctl run --headless PROMPT``) and by one agent in one conversation (``teamctl ask PROMPT``),
both as real subprocesses using the real ``anthropic`` SDK against the local fake Messages API
(``harness/model/fakeapi.py``) with its prompt-cache simulation on. Figures, per workload:

- ``prefix_stable_share``: per request, the bytes of its longest common prefix with the same
  agent's previous request over its bytes (the request's JSON in API order tools → system →
  messages, ``cache_control`` markers left out: ``fakeapi.wire_bytes``), averaged over every
  request but each agent's first. (Measured on the wire JSON, not on the block framing the cache
  simulation uses, whose per-block tags would count each small appended block ~40 bytes larger
  than it is.)
- ``prefix_kept_share``: the same longest common prefix over the bytes of the *previous*
  request: 1.0 when every request only appends (its growth, e.g. a file just read, does not
  count against it). Workloads whose requests grow by whole files gate on this one.
- ``prefix_kept_min``: the lowest of those: one request that rewrote what it had sent before
  shows here even when the mean hides it.
- ``share_lost_to_churn``, ``share_lost_to_model_output``, ``share_lost_to_runtime_text``,
  ``share_lost_to_framing``: what ``1 - prefix_stable_share`` is made of (``RequestShare``):
  bytes re-sent but not in the common prefix, and what the request appended — the model's own
  output sent back, text the runtime wrote, the API's JSON around them. With no churn the
  prefix-stable share is 1 minus the appended bytes' share: a property of the workload's turn
  sizes (one turn of many tool calls costs more of it than the same calls made one per request,
  which cost more tokens), so a workload whose turns are large gates on the kept shares.
- ``cache_read_share``: cache-read tokens over all input tokens (read + written + uncached), as
  the fake API reported them.
- ``lead_calls`` (and per task).
- ``notification_share``: bytes of notification text in the lead's requests over the bytes of
  those requests. Notification text is every message envelope of type ``idle_notification`` or
  ``task_notification`` (``[<type> from <sender>] ...``) and every coalesced status digest
  (``[team status] ...``), each up to the next envelope or the end of its text block, in a user
  turn; tool results and the ``<system-reminder>`` context block are not notifications.
- ``team_vs_solo``: weighted input tokens per completed task, team over solo, weighting as the
  API bills them: uncached 1x, cache writes 1.25x, cache reads 0.1x.
- ``completed``: every task of the team completed, every expected file written (team and solo).

``--runs N`` repeats each run and reports medians. ``--runtime DIR`` runs ``teamctl`` from the
source tree ``DIR`` (e.g. an exported older commit) while the fake API stays this one. Prints one
JSON object (every goal also as a figure in ``figures``); exits 1 when a figure misses its goal
(listed in ``misses``). ``--quick`` runs the first workload only. ``--explain`` prints each team
request after its agent's first to stderr: its share, kept share and losses, and where its first
byte differing from the agent's previous request lies (a JSON path such as
``messages[3].content[1].text``, and both requests' bytes there when it churned).

    python -m benchmarks.bench_tokens [WORKLOAD ...] [--runs N] [--quick] [--explain]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from harness.model.fakeapi import (  # noqa: E402
    FakeMessagesServer,
    ServedCall,
    canonical_bytes,
    common_prefix_len,
    request_bytes,
    wire_bytes,
)
from harness.ports import Usage  # noqa: E402

WORKLOADS = Path(__file__).resolve().parent / "workloads"
DEFAULT_WORKLOADS = ("independent4", "chain8", "realistic4")
LEAD = "lead"
SOLO = "ask"
READ_WEIGHT, WRITE_WEIGHT = 0.1, 1.25
NOTIFICATION = re.compile(
    r"^\[(?:(?:idle_notification|task_notification) from [^\]]*|team status)\]", re.M
)
ENVELOPE = re.compile(r"^(?:\[(?:[a-z_]+ from [^\]]*|team status)\]|<system-reminder>)", re.M)
TEAMCTL = ("import sys; from actors.cli.main import main; sys.argv[0] = 'teamctl'; main()",)
"""``python -c`` arguments running ``teamctl`` from ``PYTHONPATH`` (see ``--runtime``)."""


def teamctl_command(*args: str) -> list[str]:
    return [sys.executable, "-c", *TEAMCTL, *args]


# -- measurement ---------------------------------------------------------------------------------


def by_agent(calls: list[ServedCall]) -> dict[str, list[ServedCall]]:
    grouped: dict[str, list[ServedCall]] = {}
    for call in calls:
        grouped.setdefault(call.agent, []).append(call)
    return grouped


def prefix_stable_shares(calls: list[ServedCall], *, of_previous: bool = False) -> list[float]:
    """Per request after each agent's first: the share of its bytes identical to the same
    agent's previous request (the longest common prefix); ``of_previous``: the share of the
    previous request's bytes that it kept."""
    shares: list[float] = []
    for agent_calls in by_agent(calls).values():
        previous: bytes | None = None
        for call in agent_calls:
            data = wire_bytes(call.body)
            if previous is not None and data and previous:
                whole = len(previous) if of_previous else len(data)
                shares.append(common_prefix_len(previous, data) / whole)
            previous = data
    return shares


CLOSERS = frozenset(b"]}")
"""Bytes that close the JSON of a request: all a request that only appends drops of the last."""
SECTIONS = ("tools", "system", "messages")
"""The parts of ``wire_bytes``, in API order."""


@dataclass(frozen=True)
class RequestShare:
    """One request after its agent's first, as ``--explain`` shows it (see ``explain``).

    ``1 - share`` splits exactly into ``churn`` (bytes of the previous request re-sent but not
    in the common prefix: volatile text, reordering, rewritten history) and growth: what the
    request appends, itself split into the model's own output sent back (``model_output``:
    the new assistant messages), text the runtime wrote (``runtime_text``: tool results, briefs,
    mail, reminders in the new user blocks) and the API's JSON around both (``framing``: keys,
    tool-use ids, brackets). Each is counted in bytes of this request."""

    agent: str
    index: int
    size: int
    common: int
    previous: int
    churn: int
    model_output: int
    runtime_text: int
    framing: int
    where: str
    before: str
    after: str

    @property
    def share(self) -> float:
        return self.common / self.size

    @property
    def kept(self) -> float:
        return self.common / self.previous


def json_path_at(value: Any, offset: int, path: str = "") -> str:
    """Where byte ``offset`` of ``canonical_bytes(value)`` lies, as a path such as
    ``messages[3].content[1].text`` (``value`` without ``cache_control`` markers)."""
    if isinstance(value, list):
        pos = 1  # "["
        for i, item in enumerate(value):
            size = len(canonical_bytes(item))
            if pos <= offset < pos + size:
                return json_path_at(item, offset - pos, f"{path}[{i}]")
            pos += size + 1  # ","
    elif isinstance(value, dict):
        pos = 1  # "{"
        for key in sorted(value):
            head = len(canonical_bytes(key)) + 1  # '"key":'
            size = len(canonical_bytes(value[key]))
            if pos + head <= offset < pos + head + size:
                return json_path_at(value[key], offset - pos - head, f"{path}.{key}")
            pos += head + size + 1
    return path


def _where(body: dict[str, Any], offset: int) -> str:
    wire = json.loads(wire_bytes(body))
    path = json_path_at(wire, offset)
    for i, name in enumerate(SECTIONS):  # "[2][3].content" -> "messages[3].content"
        if path.startswith(f"[{i}]"):
            rest = path[len(f"[{i}]") :]
            found = re.match(r"\[(\d+)\]", rest)
            if name == "tools" and found:  # name the tool
                rest += f" ({wire[0][int(found.group(1))].get('name')})"
            return name + rest
    return path or "(the request)"


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _text_bytes(block: Any) -> int:
    """Bytes of the text a user block carries (as escaped in the canonical JSON)."""
    if not isinstance(block, dict):
        return len(canonical_bytes(block))
    if block.get("type") == "text":
        return len(canonical_bytes(str(block.get("text", "")))) - 2
    if block.get("type") == "tool_result":
        content = block.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        return sum(_text_bytes(part) for part in parts or [])
    return len(canonical_bytes(block))  # an image, a document: content the runtime sent


def _growth_split(previous: dict[str, Any], body: dict[str, Any]) -> tuple[int, int]:
    """Bytes of the model's output sent back and of runtime text in the blocks ``body`` has
    beyond ``previous``'s messages (blocks added to its last message count too)."""
    old = previous.get("messages") or []
    new = body.get("messages") or []
    model = text = 0
    for i in range(max(len(old) - 1, 0), len(new)):
        blocks = _blocks(new[i])
        if i < len(old):
            blocks = blocks[len(_blocks(old[i])) :]
        for block in blocks:
            if new[i].get("role") == "assistant":
                model += len(canonical_bytes(block))
            else:
                text += _text_bytes(block)
    return model, text


def _excerpt(data: bytes, at: int) -> str:
    return data[max(0, at - 40) : at + 80].decode("utf-8", errors="replace")


def explain(calls: list[ServedCall]) -> list[RequestShare]:
    """Per request after each agent's first (the requests ``prefix_stable_shares`` counts, in
    the same order): its share, where its first byte differing from the agent's previous request
    lies and what differs there, and what the share lost to (see ``RequestShare``)."""
    rows: list[RequestShare] = []
    for agent, agent_calls in by_agent(calls).items():
        for index in range(1, len(agent_calls)):
            before, call = agent_calls[index - 1].body, agent_calls[index].body
            old, new = wire_bytes(before), wire_bytes(call)
            if not old or not new:
                continue
            common = common_prefix_len(old, new)
            appended = set(old[common:]) <= CLOSERS
            churn = 0 if appended else len(old) - common
            growth = max(len(new) - common - churn, 0)
            churn = len(new) - common - growth
            model, text = _growth_split(before, call)
            model, text = min(model, growth), min(text, growth - min(model, growth))
            where = (
                "after the previous request's end: only appended"
                if appended
                else _where(call, common)
            )
            rows.append(
                RequestShare(
                    agent=agent,
                    index=index,
                    size=len(new),
                    common=common,
                    previous=len(old),
                    churn=churn,
                    model_output=model,
                    runtime_text=text,
                    framing=growth - model - text,
                    where=where,
                    before=_excerpt(old, common),
                    after=_excerpt(new, common),
                )
            )
    return rows


LOSSES = ("churn", "model_output", "runtime_text", "framing")
"""What a request's share lost to (``RequestShare``), in the order reported."""


def share_losses(rows: list[RequestShare]) -> dict[str, float]:
    """Each loss averaged over the requests as a share of the request: they add up to
    ``1 - prefix_stable_share``."""
    if not rows:
        return dict.fromkeys(LOSSES, 0.0)
    return {k: statistics.fmean(getattr(r, k) / r.size for r in rows) for k in LOSSES}


def format_explain(rows: list[RequestShare]) -> str:
    """``explain`` as text: one line per request, plus what differs where it churned."""
    lines = []
    for r in rows:
        lines.append(
            f"{r.agent} #{r.index}: {r.size} B, common prefix {r.common} B, share {r.share:.4f},"
            f" kept {r.kept:.4f}; lost: churn {r.churn}, model output {r.model_output},"
            f" runtime text {r.runtime_text}, framing {r.framing} B; first difference at byte"
            f" {r.common}: {r.where}"
        )
        if r.churn:
            lines.append(f"    previous: {r.before!r}")
            lines.append(f"    this:     {r.after!r}")
    losses = share_losses(rows)
    mean = statistics.fmean(r.share for r in rows) if rows else 0.0
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in losses.items())
    lines.append(f"mean share {mean:.4f}; lost {1 - mean:.4f} = {parts}")
    return "\n".join(lines)


def total_usage(calls: list[ServedCall]) -> Usage:
    return Usage(
        input_tokens=sum(c.usage.input_tokens for c in calls),
        output_tokens=sum(c.usage.output_tokens for c in calls),
        cache_creation_input_tokens=sum(c.usage.cache_creation_input_tokens for c in calls),
        cache_read_input_tokens=sum(c.usage.cache_read_input_tokens for c in calls),
    )


def all_input(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


def weighted_input(usage: Usage) -> float:
    """Input tokens weighted as billed: uncached 1x, cache writes 1.25x, cache reads 0.1x."""
    return (
        usage.input_tokens
        + WRITE_WEIGHT * usage.cache_creation_input_tokens
        + READ_WEIGHT * usage.cache_read_input_tokens
    )


def notification_bytes(text: str) -> int:
    """Bytes of the notification envelopes in one text block (see the module docstring)."""
    heads = [m.start() for m in ENVELOPE.finditer(text)] + [len(text)]
    found = 0
    for start, end in itertools.pairwise(heads):
        if NOTIFICATION.match(text, start):
            found += len(text[start:end].rstrip().encode())
    return found


def notification_share(calls: list[ServedCall]) -> float:
    """Notification bytes in the lead's requests over the bytes of those requests."""
    noted = whole = 0
    for call in calls:
        whole += len(request_bytes(call.body))
        for message in call.body.get("messages") or []:
            if message.get("role") != "user":
                continue
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks or []:
                if isinstance(block, dict) and block.get("type") == "text":
                    noted += notification_bytes(str(block.get("text", "")))
    return noted / whole if whole else 0.0


# -- running -------------------------------------------------------------------------------------


@dataclass
class RunResult:
    root: Path
    calls: list[ServedCall]
    completed_tasks: int
    files_ok: bool
    exit_code: int
    script_errors: list[str]
    stderr: str


def load(name: str) -> dict[str, Any]:
    path = Path(name) if name.endswith((".yaml", ".yml")) else WORKLOADS / f"{name}.yaml"
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def module_text(n: int, lines: int) -> str:
    """A deterministic Python module of ``lines`` lines holding ``MODULE`` and ``VERSION``."""
    out = [f'"""Module {n} of the benchmark fixture."""', "", f'MODULE = "mod_{n}"', "VERSION = 1"]
    i = 0
    while len(out) < lines:
        out += ["", "", f"def helper_{n}_{i}(value: int) -> int:"]
        out += [f"    scaled = value * {i + 2} + {n}", "    return scaled - 1"]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def make_repo(base: Path, workload: dict[str, Any], env: dict[str, str], team: bool) -> Path:
    root = base / ("team" if team else "solo")
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "bench")
    git(root, "config", "user.email", "bench@teamctl.invalid")
    modules = workload.get("modules")
    if modules:
        (root / "src").mkdir()
        for n in range(1, modules["count"] + 1):
            (root / "src" / f"mod_{n}.py").write_text(module_text(n, modules["lines"]))
    (root / "README.md").write_text("benchmark fixture\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "fixture")
    if team:
        subprocess.run(
            teamctl_command("init"),
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        )
        settings_path = root / ".team" / "settings.json"
        settings = json.loads(settings_path.read_text()) if settings_path.exists() else {}
        settings.setdefault("permissions", {})["defaultMode"] = "acceptEdits"
        settings.setdefault("team", {})["max_teammates"] = max(3, workload["teammates"])
        settings_path.write_text(json.dumps(settings, indent=2) + "\n")
    return root


def child_env(base: Path, server: FakeMessagesServer, runtime: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    home = base / "home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_BASE_URL=server.base_url,
        ANTHROPIC_API_KEY="bench-dummy-key",
        PYTHONPATH=str(runtime or ROOT),
    )
    return env


def completed_tasks(root: Path) -> int:
    """Tasks the journal shows completed (read from the events, not the projection)."""
    journal = root / ".team" / "journal.jsonl"
    done: set[str] = set()
    for line in journal.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "task.completed":
            done.add(str((event.get("data") or {}).get("task_id")))
    return len(done)


def files_ok(root: Path, workload: dict[str, Any]) -> bool:
    for spec in workload.get("files") or []:
        path = root / spec["path"]
        if not path.is_file() or spec["contains"] not in path.read_text(encoding="utf-8"):
            return False
    return True


def run_one(
    workload: dict[str, Any], base: Path, *, team: bool, runtime: Path | None, timeout: float
) -> RunResult:
    script = workload["team" if team else "solo"]
    with FakeMessagesServer(script, prompt_cache=True) as server:
        env = child_env(base, server, runtime)
        root = make_repo(base, workload, env, team)
        if team:
            args = ["run", "--headless", "--timeout", str(timeout), workload["prompt"]]
        else:
            args = ["ask", "--permission-mode", "acceptEdits", workload["prompt"]]
        proc = subprocess.run(
            teamctl_command(*args),
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout + 60,
        )
        calls = server.served
        errors = list(server.script_errors)
    return RunResult(
        root=root,
        calls=calls,
        completed_tasks=completed_tasks(root) if team else workload["tasks"],
        files_ok=files_ok(root, workload),
        exit_code=proc.returncode,
        script_errors=errors,
        stderr=proc.stderr[-2000:],
    )


def figures_of(workload: dict[str, Any], team: RunResult, solo: RunResult) -> dict[str, Any]:
    tasks = workload["tasks"]
    shares = prefix_stable_shares(team.calls)
    kept = prefix_stable_shares(team.calls, of_previous=True)
    usage = total_usage(team.calls)
    solo_usage = total_usage(solo.calls)
    lead = [c for c in team.calls if c.agent == LEAD]
    done = team.completed_tasks
    team_per_task = weighted_input(usage) / done if done else float("inf")
    solo_per_task = weighted_input(solo_usage) / tasks
    losses = share_losses(explain(team.calls))
    return {
        "prefix_stable_share": statistics.fmean(shares) if shares else 0.0,
        "prefix_kept_share": statistics.fmean(kept) if kept else 0.0,
        "prefix_kept_min": min(kept) if kept else 0.0,
        **{f"share_lost_to_{k}": v for k, v in losses.items()},
        "cache_read_share": usage.cache_read_input_tokens / all_input(usage)
        if all_input(usage)
        else 0.0,
        "lead_calls": len(lead),
        "lead_calls_per_task": len(lead) / tasks,
        "notification_share": notification_share(lead),
        "team_calls": len(team.calls),
        "solo_calls": len(solo.calls),
        "team_input_tokens": all_input(usage),
        "team_weighted_input": weighted_input(usage),
        "solo_input_tokens": all_input(solo_usage),
        "solo_weighted_input": weighted_input(solo_usage),
        "team_vs_solo": team_per_task / solo_per_task if solo_per_task else float("inf"),
        "tasks_completed": done,
        "completed": done == tasks
        and team.files_ok
        and solo.files_ok
        and team.exit_code == 0
        and solo.exit_code == 0
        and not team.script_errors
        and not solo.script_errors,
    }


GOALS = {  # figure -> (direction, goals key)
    "prefix_stable_share": (">=", "prefix_stable_share"),
    "prefix_kept_share": (">=", "prefix_kept_share"),
    "prefix_kept_min": (">=", "prefix_kept_min"),
    "lead_calls": ("<=", "lead_calls"),
    "notification_share": ("<=", "notification_share"),
    "team_vs_solo": ("<=", "team_vs_solo"),
}


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            out[key] = all(r[key] for r in runs)
        else:
            out[key] = statistics.median(r[key] for r in runs)
            out[key] = round(out[key], 4) if isinstance(out[key], float) else out[key]
    return out


def bench(
    name: str, runs: int, runtime: Path | None, timeout: float, *, show: bool = False
) -> dict[str, Any]:
    workload = load(name)
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-tokens-{workload['name']}-") as tmp:
        for run in range(runs):
            base = Path(tmp) / f"run{run}"
            team = run_one(workload, base / "t", team=True, runtime=runtime, timeout=timeout)
            solo = run_one(workload, base / "s", team=False, runtime=runtime, timeout=timeout)
            for kind, result in (("team", team), ("solo", solo)):
                if result.exit_code != 0 or result.script_errors or not result.files_ok:
                    problems.append(
                        f"{kind}: exit {result.exit_code}, files ok {result.files_ok}, "
                        f"script errors {result.script_errors[:2]}, stderr {result.stderr[-400:]!r}"
                    )
            results.append(figures_of(workload, team, solo))
            if show:
                head = (
                    f"== {workload['name']}, team run {run + 1}: requests after each agent's first"
                )
                print(f"{head}\n{format_explain(explain(team.calls))}", file=sys.stderr)
    figures = median_figures(results)
    goals = workload.get("goals") or {}
    misses = [] if figures["completed"] else [f"{workload['name']}.completed"]
    for figure, (direction, key) in GOALS.items():
        if key not in goals:
            continue
        value, goal = figures[figure], goals[key]
        ok = value >= goal if direction == ">=" else value <= goal
        if not ok:
            misses.append(f"{workload['name']}.{figure} = {value} (goal {direction} {goal})")
    return {
        "workload": workload["name"],
        "figures": figures,
        "goals": goals,
        "misses": misses,
        "problems": problems,
    }


def goal_figures(result: dict[str, Any]) -> list[common.Figure]:
    """One figure per goal of a workload's report, and one for its completion."""
    name, figures, goals = result["workload"], result["figures"], result["goals"]
    out = [
        common.figure(f"{name}.completed", figures["completed"], "", "true", figures["completed"])
    ]
    for fig, (direction, key) in GOALS.items():
        if key in goals:
            value, goal = figures[fig], goals[key]
            ok = value >= goal if direction == ">=" else value <= goal
            out.append(common.figure(f"{name}.{fig}", value, "", f"{direction} {goal}", ok, 4))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workloads", nargs="*", default=list(DEFAULT_WORKLOADS))
    parser.add_argument("--runs", type=int, default=1, help="repeat each run; medians reported")
    parser.add_argument("--runtime", type=Path, default=None, help="source tree running teamctl")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true", help="the first workload, once")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print each team request's share, first differing byte and losses to stderr",
    )
    args = parser.parse_args(argv)
    names = args.workloads[:1] if args.quick else args.workloads
    runs = 1 if args.quick else args.runs
    reports = [bench(name, runs, args.runtime, args.timeout, show=args.explain) for name in names]
    misses = [m for r in reports for m in r["misses"]]
    figures = [f for r in reports for f in goal_figures(r)]
    code = common.report(
        "tokens", figures, quick=args.quick, runs=runs, workloads=reports, misses=misses
    )
    return 1 if misses else code


if __name__ == "__main__":
    sys.exit(main())
