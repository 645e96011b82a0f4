"""``teamctl web``'s JSON API over real HTTP, against the real server as a subprocess."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.protocols import plan_mode_active
from actors.tools.toolsets import NO_HOOKS, lead_tools, teammate_tools
from tests.actors.team_support import Driver, RealTeam, real_team
from tests.web.conftest import STOP_TIMEOUT_S, WebServer, teamctl
from tests.web.sse_support import next_journal_event, sse_events

HOSTILE = "<img src=x onerror=alert(1)>"


def _post(server: WebServer, path: str, body: dict[str, object]) -> tuple[int, object]:
    with server.client() as http:
        response = http.post(
            path, json=body, headers={"X-Teamctl-CSRF": server.csrf(), "Origin": server.base}
        )
    return response.status_code, response.json()


def test_state_lists_tasks_and_answers_401_without_token(web: WebServer) -> None:
    teamctl(web.repo, "task", "add", "write the parser", "--description", "tokens first")
    teamctl(web.repo, "task", "add", "test it", "--blocked-by", "task_1")
    with web.client() as http:
        state = http.get("/api/state").json()
    tasks = {t["id"]: t for t in state["tasks"]}
    assert tasks["task_1"]["subject"] == "write the parser"
    assert tasks["task_1"]["description"] == "tokens first"
    assert tasks["task_2"]["blocked_by"] == ["task_1"] and tasks["task_2"]["column"] == "blocked"
    assert state["team"] == "repo" and state["seq"] >= 3 and state["human"] == "user"
    assert {row["agent"] for row in state["inboxes"]} == {"lead"}
    with web.client(auth=False) as http:
        response = http.get("/api/state")
    assert response.status_code == 401 and response.content == b""


def test_hostile_subject_comes_back_as_a_plain_json_string(web: WebServer) -> None:
    teamctl(web.repo, "task", "add", HOSTILE)
    with web.client() as http:
        response = http.get("/api/state")
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    [task] = response.json()["tasks"]
    assert task["subject"] == HOSTILE


@pytest.fixture
def planning_team(tmp_path: Path) -> Iterator[tuple[RealTeam, Driver]]:
    """A team whose teammate ``ann`` holds a plan-required task and submitted a plan that a human
    reviews (``approvals.plans`` = human)."""
    team = real_team(tmp_path / "repo", {"approvals": {"plans": "human"}})
    Driver(lead_tools(team, hooks=NO_HOOKS), "lead", team.root).ok(
        "spawn_teammate", name="ann", prompt="work"
    )  # first: on the real runtime a teammate with no work claims a ready task itself
    team.board.create("refactor", "split the module", plan_required=True)
    ann = Driver(teammate_tools(team, "ann", hooks=NO_HOOKS), "ann", team.root)
    ann.ok("claim_task", task_id="task_1")
    ann.ok("submit_plan", plan=f"1. split {HOSTILE}\n2. test")
    yield team, ann
    team.close()


def test_a_plan_approved_through_the_api_is_journaled_as_the_human(
    planning_team: tuple[RealTeam, Driver], start_web: Callable[..., WebServer]
) -> None:
    team, _ = planning_team
    server = start_web(team.root, "--as", "maria")
    with server.client() as http:
        state = http.get("/api/state").json()
    [member] = [m for m in state["members"] if m["name"] == "ann"]
    assert member["task_id"] == "task_1" and member["task_subject"] == "refactor"
    [task] = state["tasks"]
    assert task["owner"] == "ann" and task["plan"] == "submitted"
    [approval] = state["approvals"]
    assert approval["kind"] == "plan" and approval["agent"] == "ann"
    assert approval["plan"] == f"1. split {HOSTILE}\n2. test" and approval["subject"] == "refactor"
    rid = approval["request_id"]
    assert plan_mode_active(team.board.refresh(), "ann")

    status, body = _post(server, f"/api/approvals/{rid}", {"decision": "reject"})
    assert status == 409 and "feedback" in str(body)
    assert team.events("plan.reviewed") == []

    status, body = _post(server, f"/api/approvals/{rid}", {"decision": "approve", "feedback": "go"})
    assert status == 200, body
    assert body == {
        "request_id": rid,
        "kind": "plan",
        "decision": "approved",
        "teammate": "ann",
        "task_id": "task_1",
        "by": "maria",
    }
    [review] = team.events("plan.reviewed")
    assert review.actor == "maria" and review.data["approve"] is True
    assert not plan_mode_active(team.board.refresh(), "ann")
    [response] = team.inbox("ann")
    assert (response.type, response.sender) == ("plan_approval_response", "maria")
    assert response.body["approve"] is True and response.body["feedback"] == "go"
    status, body = _post(server, f"/api/approvals/{rid}", {"decision": "approve"})
    assert status == 409 and "already reviewed" in str(body)
    status, body = _post(server, f"/api/approvals/{rid}", {"decision": "maybe"})
    assert status == 400
    status, body = _post(server, "/api/approvals/plan-nope", {"decision": "approve"})
    assert status == 409 and len(team.events("plan.reviewed")) == 1


def test_a_message_is_sent_to_a_member_as_the_human(web: WebServer) -> None:
    status, body = _post(web, "/api/messages", {"to": "lead", "body": f"hi {HOSTILE}"})
    assert status == 200, body
    [sent] = body["sent"]  # type: ignore[index]
    assert sent["to"] == "lead"
    [message] = json.loads(teamctl(web.repo, "inbox", "lead", "--json").stdout)
    assert message["from"] == "user" and message["body"] == {"text": f"hi {HOSTILE}"}
    assert _post(web, "/api/messages", {"to": "nobody", "body": "x"})[0] == 404
    assert _post(web, "/api/messages", {"to": "lead", "body": "  "})[0] == 400


def test_events_stream_a_task_added_from_the_cli_and_resume_from_last_event_id(
    web: WebServer,
) -> None:
    with web.client() as http, http.stream("GET", "/api/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        teamctl(web.repo, "task", "add", HOSTILE)
        created = next_journal_event(sse_events(response), "task.created")
    event = created.json()
    assert event["data"]["subject"] == HOSTILE and event["data"]["task_id"] == "task_1"
    assert created.id == str(event["seq"])
    lines = teamctl(web.repo, "events", "--json").stdout.splitlines()
    assert event["seq"] == json.loads(lines[-1])["seq"]
    teamctl(web.repo, "task", "add", "second")
    headers = {"Last-Event-ID": created.id}
    with web.client() as http, http.stream("GET", "/api/events", headers=headers) as response:
        first = next(iter(sse_events(response)))
    assert first.event == "journal"
    assert first.json()["type"] == "task.created" and first.json()["data"]["subject"] == "second"
    assert int(first.id or 0) == event["seq"] + 1
    with web.client() as http:
        assert http.get("/api/events", headers={"Last-Event-ID": "x"}).status_code == 400


def test_an_inbox_change_is_an_inbox_event(web: WebServer) -> None:
    with web.client() as http, http.stream("GET", "/api/events") as response:
        teamctl(web.repo, "send", "lead", "hello")
        for item in sse_events(response):
            if item.event == "inbox":
                assert "lead" in item.json()["agents"]
                break


def test_transcripts_of_known_members_only(
    planning_team: tuple[RealTeam, Driver], start_web: Callable[..., WebServer]
) -> None:
    from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
    from harness.transcript import Transcript

    team, _ = planning_team
    # ann's hosted actor wrote a transcript of its own: with the runtime stopped, a crafted one
    # (a hostile text, a tool call and its result) takes its place
    team.close()
    (team.root / ".team" / "transcripts" / "ann.jsonl").unlink()
    log = Transcript.for_agent(team.root / ".team" / "transcripts", "ann", fsync=False)
    log.meta(agent="ann")
    log.message(Message(role="user", content=(TextBlock(text=HOSTILE),)))
    log.message(
        Message(
            role="assistant",
            content=(ToolUseBlock(id="tu_1", name="bash", input={"command": "ls"}),),
        )
    )
    log.message(
        Message(role="user", content=(ToolResultBlock(tool_use_id="tu_1", content="a.py"),))
    )
    log.close()
    (team.root / ".team" / "secret.jsonl").write_text("{}\n")
    server = start_web(team.root)
    with server.client() as http:
        body = http.get("/api/transcripts/ann").json()
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][0]["blocks"] == [{"type": "text", "text": HOSTILE}]
        assert body["messages"][1]["blocks"][0]["name"] == "bash"
        result = body["messages"][2]["blocks"][0]
        assert (result["name"], result["content"], result["is_error"]) == ("bash", "a.py", False)
        assert http.get("/api/transcripts/lead").json()["messages"] == []  # member, no file
        for bad in ("nobody", "..%2Fsecret", "..%2F..%2Fjournal", "%2e%2e%2fsecret", "ann%00"):
            response = http.get(f"/api/transcripts/{bad}")
            assert response.status_code == 404, bad
            assert "secret" not in response.text


def test_job_output_of_known_jobs_only(web: WebServer) -> None:
    from actors.factory import open_team
    from mailboxes.events import JobStarted, draft

    with open_team(web.repo) as team:
        body = JobStarted(job_id="job_1", owner="lead", command="make", cwd=str(web.repo))
        team.journal.append(lambda seen: [draft("job.started", "jobs", body)], after=0)
    (web.repo / ".team" / "jobs" / "job_1.log").write_text(f"building {HOSTILE}\n")
    (web.repo / ".team" / "jobs" / "other.log").write_text("not a job\n")
    with web.client() as http:
        output = http.get("/api/jobs/job_1/output").json()
        assert output == {
            "job_id": "job_1",
            "status": "running",
            "output": f"building {HOSTILE}\n",
            "truncated": False,
        }
        for bad in ("other", "..%2Fjournal.jsonl", "job_2", "..%2F..%2Fjobs%2Fjob_1"):
            assert http.get(f"/api/jobs/{bad}/output").status_code == 404, bad


def test_ctrl_c_stops_the_server_cleanly_with_a_stream_open(web: WebServer) -> None:
    with web.client() as http, http.stream("GET", "/api/events") as response:
        assert response.status_code == 200
        web.process.send_signal(signal.SIGINT)
        # One Ctrl-C: wait for the exit before ``stop``, which would press it again (a second
        # Ctrl-C forces the exit without the graceful end of the stream).
        web.process.wait(timeout=STOP_TIMEOUT_S)
        code = web.stop()
    assert code == 130
    assert "Traceback" not in web.stderr_text, web.stderr_text
    assert web.stderr_text.strip() == "interrupted"


@pytest.mark.parametrize("gap_s", [0.0, 0.05])
def test_a_second_ctrl_c_while_stopping_exits_at_once_without_a_traceback(
    web: WebServer, gap_s: float
) -> None:
    with web.client() as http, http.stream("GET", "/api/events") as response:
        assert response.status_code == 200
        web.process.send_signal(signal.SIGINT)
        time.sleep(gap_s)  # a person pressing Ctrl-C again while the server stops
        if web.process.poll() is None:
            web.process.send_signal(signal.SIGINT)
        web.process.wait(timeout=STOP_TIMEOUT_S)
        code = web.stop()
    # Interrupted either way: 130 from the CLI, or killed by the signal itself when the second
    # one lands after the handlers were restored (a shell shows both as 130).
    assert code in (130, -signal.SIGINT)
    assert "Traceback" not in web.stderr_text, web.stderr_text
    assert "Error" not in web.stderr_text, web.stderr_text


def test_a_permission_request_is_listed_and_denied_as_the_human(
    planning_team: tuple[RealTeam, Driver], start_web: Callable[..., WebServer]
) -> None:
    from actors.board.protocols import pending_permissions, request_permission

    team, _ = planning_team
    request_permission(
        team.board, "perm-1", "ann", "bash", {"target": f"rm -rf {HOSTILE}"}, "not allowed"
    )
    server = start_web(team.root)
    with server.client() as http:
        approvals = http.get("/api/state").json()["approvals"]
    [perm] = [a for a in approvals if a["kind"] == "permission"]
    assert (perm["request_id"], perm["agent"], perm["tool"]) == ("perm-1", "ann", "bash")
    assert perm["input"] == {"target": f"rm -rf {HOSTILE}"} and perm["reason"] == "not allowed"
    status, body = _post(server, "/api/approvals/perm-1", {"decision": "reject", "feedback": "no"})
    assert status == 200 and body == {
        "request_id": "perm-1",
        "kind": "permission",
        "decision": "deny",
        "by": "user",
    }
    [decided] = team.events("permission.decided")
    assert decided.actor == "user" and decided.data["by"] == "user"
    assert decided.data["decision"] == "deny" and decided.data["reason"] == "no"
    assert pending_permissions(team.journal) == []
    status, body = _post(server, "/api/approvals/perm-1", {"decision": "approve"})
    assert status == 409 and "already decided" in str(body)


def test_a_task_detail_has_its_history(web: WebServer) -> None:
    teamctl(web.repo, "task", "add", "parse", "--verify", "true")
    teamctl(web.repo, "task", "edit", "task_1", "--description", HOSTILE)
    with web.client() as http:
        detail = http.get("/api/tasks/task_1").json()
        assert http.get("/api/tasks/task_9").status_code == 404
    assert detail["task"]["description"] == HOSTILE and detail["task"]["verify"] == "true"
    assert [e["type"] for e in detail["history"]] == ["task.created", "task.updated"]
    assert detail["verifications"] == []


def test_a_browser_is_opened_with_the_url_unless_no_open(team_repo: Path, tmp_path: Path) -> None:
    import os
    import queue
    import subprocess
    import threading

    from tests.web.conftest import TEAMCTL, cli_env, launch_web

    fifo = tmp_path / "opened"
    os.mkfifo(fifo)
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" > {fifo}\n')
    browser.chmod(0o755)
    env = {**cli_env(), "BROWSER": str(browser)}
    opened: queue.Queue[str] = queue.Queue()

    def read() -> None:
        with fifo.open() as pipe:
            opened.put(pipe.readline().strip())

    threading.Thread(target=read, daemon=True).start()
    process = subprocess.Popen(
        [TEAMCTL, "web", "--port", "0"],
        cwd=team_repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert opened.get(timeout=30) == url
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=15)
    # --no-open: the same environment, and the browser is never run.
    threading.Thread(target=read, daemon=True).start()
    server = launch_web(team_repo, env=env)
    try:
        with server.client() as http:
            assert http.get("/api/state").status_code == 200
    finally:
        assert server.stop() == 130
    with fifo.open("w") as pipe:  # the first line the reader gets, unless a browser ran
        pipe.write("none\n")
    assert opened.get(timeout=30) == "none"


def test_worktrees_show_how_far_ahead_and_behind_their_base_they_are(web: WebServer) -> None:
    import subprocess

    def git(*args: str, cwd: Path = web.repo) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=cwd, check=True
        )

    (web.repo / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("commit", "-qm", "a")
    teamctl(web.repo, "task", "add", "work")
    teamctl(web.repo, "worktree", "add", "w1", "--task", "task_1")
    tree = web.repo / ".worktrees" / "w1"
    for n in range(2):
        (tree / f"b{n}.txt").write_text("b\n")
        git("add", ".", cwd=tree)
        git("commit", "-qm", f"b{n}", cwd=tree)
    (web.repo / "c.txt").write_text("c\n")
    git("add", "c.txt")
    git("commit", "-qm", "c")
    with web.client() as http:
        [row] = http.get("/api/state").json()["worktrees"]
    assert (row["name"], row["branch"], row["task_id"]) == ("w1", "wt/w1", "task_1")
    assert (row["ahead"], row["behind"]) == (2, 1)


def test_state_has_every_member_field_worktree_cron_workflow_and_job(
    tmp_path: Path, start_web: Callable[..., WebServer]
) -> None:
    from tests.web.busy_team import STATES, build_busy_team

    busy = build_busy_team(tmp_path / "repo")
    server = start_web(busy.root)
    with server.client() as http:
        state = http.get("/api/state").json()
        output = http.get("/api/jobs/job_1/output").json()
    members = {m["name"]: m for m in state["members"]}
    assert {n: members[n]["status"] for n in STATES} == STATES
    ann = members["ann"]
    assert (ann["role"], ann["task_id"], ann["task_subject"], ann["worktree"]) == (
        "ann-role",
        "task_1",
        "build the parser",
        "w1",
    )
    assert (ann["unread"], ann["tokens"], ann["cost_usd"]) == (2, 1234, 0.0123)
    assert ann["alive"] is False and ann["orphaned"] is True  # no runtime hosts it here
    assert members["cy"]["reason"] == "why cy" and members["dee"]["reason"] == "done"
    assert all(members[n]["task_id"] is None for n in STATES if n != "ann")
    assert members["max"]["kind"] == "human" and members["max"]["status"] == "active"

    worktrees = {w["name"]: w for w in state["worktrees"]}
    w1, w2 = worktrees["w1"], worktrees["w2"]
    assert (w1["task_id"], w1["ahead"], w1["behind"], w1["merged"]) == ("task_1", 2, 1, False)
    assert (w2["task_id"], w2["merged"], w2["ahead"]) == ("task_2", True, 0)
    assert w2["merged_commit"] and w1["base"] and w2["base"]

    [cron] = state["crons"]
    assert (cron["cron_id"], cron["cron"], cron["owner"]) == ("cron_1", "*/15 * * * *", "lead")
    assert cron["prompt"] == f"check CI {HOSTILE}" and cron["next_fire"]
    [run] = state["workflows"]
    assert (run["run_id"], run["name"], run["status"], run["phase"], run["done"]) == (
        "wf_1",
        "release",
        "running",
        "build",
        1,
    )
    lines = [line for _, line in run["progress"]]
    assert "workflow wf_1 step compile: done" in lines
    assert lines[-1] == f"workflow wf_1 log: note {HOSTILE}"
    [job] = state["jobs"]
    assert (job["job_id"], job["command"], job["status"]) == ("job_1", f"echo {HOSTILE}", "running")
    assert output["output"] == busy.job_log
