"""TaskCreated, TaskCompleted and TeammateIdle hooks: real command hooks, exit 2 refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.tools.hooks import hook_runner_for, run_teammate_idle_hook
from actors.tools.toolsets import lead_tools, teammate_tools
from tests.actors.team_support import Driver, RealTeam, real_team


def hooks(event: str, command: str) -> dict[str, Any]:
    return {"hooks": {event: [{"matcher": "", "hooks": [{"type": "command", "command": command}]}]}}


def read_payloads(root: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / name).read_text().splitlines()]


# Appends its stdin (one JSON line) to a file, then refuses when the payload mentions "bad".
CREATED = (
    'payload=$(cat); echo "$payload" >> created.jsonl; '
    'case "$payload" in *\'"task_subject": "bad\'*) '
    "echo 'subjects starting with bad are not allowed' >&2; exit 2;; esac"
)
COMPLETED = (
    'payload=$(cat); echo "$payload" >> completed.jsonl; '
    "case \"$payload\" in *'tests pass'*) exit 0;; esac; "
    "echo 'run the tests and say so in the summary' >&2; exit 2"
)


def test_task_created_hook_refuses_before_journaling(tmp_path: Path) -> None:
    team = real_team(tmp_path / "repo", hooks("TaskCreated", CREATED))
    try:
        lead = Driver(lead_tools(team), "lead", team.root)  # hooks from the team settings
        refused = lead.error("create_task", subject="bad idea", description="x")
        assert refused == (
            "task refused by a TaskCreated hook: subjects starting with bad are not allowed"
        )
        assert team.events("task.created") == []
        assert lead.ok("create_task", subject="good idea") == "Created task_1 (ready)."
        first, second = read_payloads(team.root, "created.jsonl")
        assert first["hook_event_name"] == "TaskCreated" and first["agent_name"] == "lead"
        assert first["task_subject"] == "bad idea" and first["task_description"] == "x"
        assert second["task_subject"] == "good idea" and second["cwd"] == str(team.root)
        assert [e.data["subject"] for e in team.events("task.created")] == ["good idea"]
    finally:
        team.close()


def test_task_completed_hook_refuses_with_feedback(tmp_path: Path) -> None:
    team = real_team(tmp_path / "repo", hooks("TaskCompleted", COMPLETED))
    try:
        Driver(lead_tools(team), "lead", team.root).ok("spawn_teammate", name="ann", prompt="p")
        team.board.create("fix the parser")
        ann = Driver(teammate_tools(team, "ann"), "ann", team.root)
        ann.ok("claim_task", task_id="task_1")
        refused = ann.error("complete_task", task_id="task_1", summary="fixed it")
        assert "refused by a TaskCompleted hook" in refused
        assert "run the tests and say so in the summary" in refused
        assert team.board.refresh().task("task_1").status == "in_progress"
        assert team.events("task.completed") == []
        ann.ok("complete_task", task_id="task_1", summary="fixed it, tests pass")
        assert team.board.refresh().task("task_1").status == "completed"
        payload = read_payloads(team.root, "completed.jsonl")[0]
        assert payload["hook_event_name"] == "TaskCompleted"
        assert (payload["agent_name"], payload["teammate_name"]) == ("ann", "ann")
        assert (payload["task_id"], payload["task_subject"]) == ("task_1", "fix the parser")
        assert payload["summary"] == "fixed it"
    finally:
        team.close()


def test_teammate_idle_hook_keeps_the_teammate_working(tmp_path: Path) -> None:
    team: RealTeam = real_team(tmp_path / "repo")
    try:
        task = team.board.create("write docs")
        command = (
            'payload=$(cat); echo "$payload" > idle.json; '
            "case \"$payload\" in *'all done'*) exit 0;; esac; "
            "echo 'the docs still have TODOs' >&2; exit 2"
        )
        settings = team.settings.model_validate(hooks("TeammateIdle", command))
        runner = hook_runner_for(settings)
        feedback = run_teammate_idle_hook(runner, "ann", task, "stopping here", cwd=team.root)
        assert feedback == "the docs still have TODOs"
        payload = json.loads((team.root / "idle.json").read_text())
        assert payload["hook_event_name"] == "TeammateIdle"
        assert (payload["agent_name"], payload["teammate_name"]) == ("ann", "ann")
        assert (payload["task_id"], payload["last_message"]) == ("task_1", "stopping here")
        assert run_teammate_idle_hook(runner, "ann", None, "all done", cwd=team.root) is None
        assert json.loads((team.root / "idle.json").read_text())["task_id"] is None
        assert run_teammate_idle_hook(None, "ann", task, "x") is None
    finally:
        team.close()


def test_team_hooks_carry_the_session_and_continue_false_stops_the_teammate(
    tmp_path: Path,
) -> None:
    from harness.hooks import HOOK_SESSION_KEY, HookSession

    stop = (
        'payload=$(cat); echo "$payload" > completed.json; '
        'echo \'{"continue": false, "stopReason": "CI is red, stop here"}\''
    )
    team = real_team(tmp_path / "repo", hooks("TaskCompleted", stop))
    try:
        Driver(lead_tools(team), "lead", team.root).ok("spawn_teammate", name="ann", prompt="p")
        team.board.create("fix the parser", "the lexer too")
        ann = Driver(teammate_tools(team, "ann"), "ann", team.root)
        stopped: list[str] = []
        transcript = str(team.root / ".team" / "transcripts" / "ann.jsonl")
        ann.ctx.session_id = "sess-ann"
        ann.ctx.extra[HOOK_SESSION_KEY] = HookSession(
            transcript_path=transcript, project_dir=str(team.root), stop=stopped.append
        )
        ann.ok("claim_task", task_id="task_1")
        refused = ann.error("complete_task", task_id="task_1", summary="done")
        assert "CI is red, stop here" in refused
        assert stopped == ["A TaskCompleted hook stopped the agent: CI is red, stop here"]
        assert team.board.refresh().task("task_1").status == "in_progress"
        payload = json.loads((team.root / "completed.json").read_text())
        assert payload["session_id"] == "sess-ann"
        assert payload["transcript_path"] == transcript
        assert payload["task_description"] == "the lexer too"
        assert payload["teammate_name"] == "ann"
    finally:
        team.close()
