"""A team with a bit of everything the dashboard shows (members in every state, a worktree ahead
of its base and one merged, unread mail, model usage, a cron entry, a workflow run, a job), built
in a real git repository through the real CLI and the journal's own write path.

Agent-written text in it is hostile (``HOSTILE``), so the tests that read it back also show it
is never markup."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from mailboxes.events import (
    CronScheduled,
    JobStarted,
    MemberSpawned,
    MemberStatusChanged,
    MemberStopped,
    UsageRecorded,
    WorkflowLog,
    WorkflowPhase,
    WorkflowStarted,
    WorkflowStepCompleted,
    WorkflowStepStarted,
    draft,
)
from mailboxes.messages import MessageDraft
from tests.web.conftest import teamctl

HOSTILE = "<img src=x onerror=alert(1)>"
STATES = {
    "ann": "working",
    "bob": "waiting_permission",
    "cy": "stalled",
    "dee": "stopped",
    "eve": "idle",
}
"""Each agent member and the state the team leaves it in."""


@dataclass(frozen=True)
class BusyTeam:
    root: Path
    job_log: str


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _commit(where: Path, name: str) -> None:
    (where / name).write_text(f"{name}\n")
    _git("add", name, cwd=where)
    _git("commit", "-qm", name, cwd=where)


def _transcript(root: Path) -> None:
    """ann's transcript: a hostile message from the lead, a tool call and its hostile output."""
    from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
    from harness.transcript import Transcript

    log = Transcript.for_agent(root / ".team" / "transcripts", "ann", fsync=False)
    log.meta(agent="ann")
    log.message(Message(role="user", content=(TextBlock(text=f"message from lead: {HOSTILE}"),)))
    call = ToolUseBlock(id="tu_1", name="bash", input={"command": f"cat {HOSTILE}"})
    log.message(Message(role="assistant", content=(TextBlock(text=f"reading {HOSTILE}"), call)))
    result = ToolResultBlock(tool_use_id="tu_1", content=f"result <b>{HOSTILE}</b>")
    log.message(Message(role="user", content=(result,)))
    log.close()


def build_busy_team(root: Path) -> BusyTeam:
    # Fixed data for the dashboard's views, written as a runtime would (no runtime runs: its
    # members would not stay in the states set here).
    from actors.factory import init_team, open_team

    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    team = open_team(root, actor="runtime")
    try:
        from actors.settings import load_settings

        model = load_settings(team.repo.settings_path).models.lead
        lead = MemberSpawned(name="lead", role="lead", model=model)
        team.journal.append(lambda seen: [draft(lead.TYPE, "runtime", lead)], after=0)
        team.mailbox.ensure_inbox("lead")
        _commit(root, "base.txt")
        teamctl(root, "task", "add", "build the parser")  # task_1: ann's, in worktree w1
        teamctl(root, "task", "add", "ship the docs")  # task_2: merged from w2
        # w2: done by a person and merged into the main branch.
        teamctl(root, "worktree", "add", "w2", "--task", "task_2")
        _commit(root / ".worktrees" / "w2", "docs.txt")
        teamctl(root, "task", "claim", "task_2", "--as", "max")
        teamctl(root, "task", "complete", "task_2", "--as", "max", "--summary", "done")
        teamctl(root, "worktree", "merge", "w2")
        # w1: two commits ahead of its base, which gained one meanwhile.
        teamctl(root, "worktree", "add", "w1", "--task", "task_1")
        for name in ("p1.txt", "p2.txt"):
            _commit(root / ".worktrees" / "w1", name)
        _commit(root, "later.txt")

        def append(*drafts: object) -> None:
            team.journal.append(lambda seen: list(drafts), after=0)  # type: ignore[arg-type]

        append(
            *(
                draft("member.spawned", "lead", MemberSpawned(name=n, role=f"{n}-role"))
                for n in STATES
            )
        )
        team.board.claim("task_1", "ann")
        for name, status in STATES.items():
            if status == "stopped":
                append(draft("member.stopped", "runtime", MemberStopped(name=name, reason="done")))
            else:
                body = MemberStatusChanged(name=name, status=status, reason=f"why {name}")
                append(draft("member.status_changed", name, body))
        usage = UsageRecorded(
            agent="ann",
            model="claude-sonnet-4-5",
            task_id="task_1",
            input_tokens=1200,
            output_tokens=34,
            cost_usd=0.0123,
        )
        append(draft("usage.recorded", "ann", usage))
        for name in ("ann", "bob"):
            team.mailbox.ensure_inbox(name)
        team.mailbox.deliver("lead", MessageDraft(to="ann", type="message", body={"text": "hi"}))
        team.mailbox.deliver("lead", MessageDraft(to="ann", type="message", body={"text": "ho"}))
        cron = CronScheduled(
            cron_id="cron_1", cron="*/15 * * * *", prompt=f"check CI {HOSTILE}", recurring=True
        )
        append(draft("cron.scheduled", "lead", cron))
        run = "wf_1"
        append(
            draft(
                "workflow.started",
                "lead",
                WorkflowStarted(run_id=run, name="release", file="release.py", file_sha256="0"),
            ),
            draft("workflow.phase", "lead", WorkflowPhase(run_id=run, title="build")),
            draft(
                "workflow.step_started",
                "lead",
                WorkflowStepStarted(run_id=run, key="k1", name="compile", phase="build"),
            ),
            draft(
                "workflow.step_completed",
                "lead",
                WorkflowStepCompleted(run_id=run, key="k1", name="compile", phase="build"),
            ),
            draft("workflow.log", "lead", WorkflowLog(run_id=run, text=f"note {HOSTILE}")),
        )
        from actors.board.protocols import request_permission

        request_permission(
            team.board, "perm-1", "bob", "bash", {"command": f"rm -rf {HOSTILE}"}, f"why {HOSTILE}"
        )
        _transcript(root)
        job = JobStarted(job_id="job_1", owner="lead", command=f"echo {HOSTILE}", cwd=str(root))
        append(draft("job.started", "jobs", job))
        job_log = f"output {HOSTILE}\n<script>window.__pwned = 1</script>\n"
        (root / ".team" / "jobs").mkdir(exist_ok=True)
        (root / ".team" / "jobs" / "job_1.log").write_text(job_log)
    finally:
        team.close()
    return BusyTeam(root, job_log)
