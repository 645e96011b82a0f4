"""What a real ``TeamRuntime``'s services (``actors/runtime/services.py``) answer: for bad input,
which error with which text; for good input, which journal events, messages and views. The team
tools and protocols (tests/actors/tools/, tests/actors/board/) are driven over these services."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.services import TeammateSpec, TeamServices
from tests.actors.team_support import RealTeam, real_team

SETTINGS = {"team": {"max_teammates": 2}}


@pytest.fixture
def team(tmp_path: Path) -> Iterator[RealTeam]:
    team = real_team(tmp_path / "repo", SETTINGS)
    yield team
    team.close()


Call = Callable[[TeamServices], object]


def outcome(services: TeamServices, call: Call) -> tuple[str, str]:
    try:
        call(services)
    except Exception as exc:  # the point: which error, with which text
        return type(exc).__name__, str(exc)
    return "ok", ""


def spawn(name: str, task_id: str | None = None) -> Call:
    return lambda s: s.spawn_teammate(
        TeammateSpec(name=name, prompt="work", task_id=task_id), by="lead"
    )


def send(to: str, type: str = "message") -> Call:
    return lambda s: s.send("lead", to, type, {"text": "hi"})


def cron(expr: str, prompt: str = "check", tz: str | None = None) -> Call:
    return lambda s: s.schedule_cron(expr, prompt, recurring=True, tz=tz, owner="lead")


BAD_INPUTS: dict[str, tuple[Call, str, str]] = {
    # case: (call, the error's type, the start of its text)
    "spawn an unsafe name": (
        spawn("../x"),
        "InvalidAgentName",
        "invalid agent name '../x': use 1-64 letters, digits,",
    ),
    "spawn the lead's name": (
        spawn("lead"),
        "DuplicateMember",
        "team member 'lead' already exists",
    ),
    "spawn a live member again": (
        spawn("ann"),
        "DuplicateMember",
        "team member 'ann' already exists",
    ),
    "spawn a name differing in case": (
        spawn("Ann"),
        "DuplicateMember",
        "team member 'ann' already exists (names are case-insensitive): pick another name than 'Ann'",
    ),
    "spawn a reserved name": (
        spawn("runtime"),
        "InvalidMemberName",
        "invalid member name 'runtime': the name is reserved for the program itself",
    ),
    "spawn on a claimed task": (
        spawn("cy", "task_1"),
        "ClaimRefused",
        "could not claim task task_1: already claimed by ann",
    ),
    "spawn on a blocked task": (
        spawn("cy", "task_2"),
        "ClaimRefused",
        "could not claim task task_2: blocked by task_1",
    ),
    "spawn on an unknown task": (spawn("cy", "task_9"), "UnknownTask", "unknown task 'task_9'"),
    "send to an unknown member": (
        send("zed"),
        "UnknownRecipient",
        "unknown recipient 'zed' (known agents: ann, lead)",
    ),
    "send to an unsafe name": (send("../x"), "ValidationError", "1 validation error"),
    "send an unknown message type": (send("ann", "gossip"), "ValidationError", "1 validation"),
    "shut down an unknown member": (
        lambda s: s.request_shutdown("zed", by="lead"),
        "UnknownMember",
        "unknown team member 'zed'",
    ),
    "shut down the lead": (
        lambda s: s.request_shutdown("lead", by="ann"),
        "UnknownMember",
        "unknown team member 'lead'",
    ),
    "a cron with two fields": (
        cron("* *"),
        "CronError",
        "cron expression '* *' has 2 fields; expected 5 (minute hour day-of-month month",
    ),
    "a cron minute out of range": (
        cron("61 * * * *"),
        "CronError",
        "minute field: 61 is out of range 0-59",
    ),
    "a cron in an unknown zone": (
        cron("0 9 * * *", tz="Mars/Olympus"),
        "CronError",
        "unknown time zone 'Mars/Olympus' (use an IANA name",
    ),
    "a cron without a prompt": (
        cron("0 9 * * *", prompt="  "),
        "CronError",
        "a cron job needs a prompt",
    ),
    "cancel an unknown cron": (
        lambda s: s.cancel_cron("cron_nope", by="lead"),
        "CronError",
        "unknown cron job 'cron_nope'",
    ),
}


CRON = {"cron": "*/5 * * * *", "prompt": "check", "recurring": False, "tz": None}

SERVICE_EVENTS = {
    "task.created",
    "task.claimed",
    "member.spawned",
    "shutdown.requested",
    "cron.scheduled",
    "cron.cancelled",
}
"""What the services journal (the members' actors add their own progress)."""


def given(services: TeamServices) -> None:
    """task_1 held by ann, task_2 blocked by it."""
    services.board.create("a")
    services.board.create("b", blocked_by=["task_1"])
    services.spawn_teammate(TeammateSpec(name="ann", prompt="work", task_id="task_1"), by="lead")


def test_bad_input_gets_the_runtimes_error_and_changes_nothing(team: RealTeam) -> None:
    services = team.services
    given(services)
    team.park("ann")  # her actor, held in its first model call, records nothing more
    before = [e.seq for e in team.events() if e.type in SERVICE_EVENTS]
    answers = {case: outcome(services, call) for case, (call, _, _) in BAD_INPUTS.items()}
    wrong = {
        case: answer
        for case, answer in answers.items()
        if answer[0] != BAD_INPUTS[case][1] or not answer[1].startswith(BAD_INPUTS[case][2])
    }
    assert wrong == {}
    assert "gossip" in answers["send an unknown message type"][1]
    assert [e.seq for e in team.events() if e.type in SERVICE_EVENTS] == before  # none recorded
    assert [m.name for m in services.members()] == ["lead", "ann"]
    # the team limit, counted without the lead (ann and bob are the two allowed)
    assert outcome(services, spawn("bob")) == ("ok", "")
    assert outcome(services, spawn("cy")) == ("TeamError", "the team already has 2 teammates")


def test_good_input_gives_these_events_messages_and_views(team: RealTeam) -> None:
    services = team.services
    given(services)
    services.spawn_teammate(TeammateSpec(name="bob", role="tester", prompt="p"), by="lead")
    services.send("lead", "*", "broadcast", {"text": "standup"})
    rid = services.request_shutdown("bob", by="lead")
    view = services.schedule_cron("*/5 * * * *", "check", recurring=False, tz=None, owner="ann")
    assert (view.cron, view.prompt, view.recurring, view.owner, view.status) == (
        "*/5 * * * *",
        "check",
        False,
        "ann",
        "active",
    )
    listed = [(v.cron_id, v.cron, v.prompt, v.recurring, v.owner) for v in services.list_crons()]
    assert listed == [(view.cron_id, "*/5 * * * *", "check", False, "ann")]
    services.cancel_cron(view.cron_id, by="lead")
    services.cancel_cron(view.cron_id, by="lead")  # twice: no error, one event
    assert services.list_crons() == []

    models = team.settings.models
    assert [(m.name, m.kind, m.role, m.task_id, m.model) for m in services.members()] == [
        ("lead", "agent", "lead", None, models.lead),
        ("ann", "agent", "general", "task_1", models.teammate),
        ("bob", "agent", "tester", None, models.teammate),
    ]
    events = [(e.type, e.actor, e.data) for e in team.events() if e.type in SERVICE_EVENTS]
    spawned = {"kind": "agent", "model": models.teammate, "plan_required": False, "tools": None}
    assert events == [
        ("member.spawned", "runtime", events[0][2]),  # the lead's, as the runtime starts
        ("task.created", "runtime", events[1][2]),
        ("task.created", "runtime", events[2][2]),
        (
            "task.claimed",
            "runtime",
            {"epoch": 1, "human": False, "owner": "ann", "task_id": "task_1"},
        ),
        ("member.spawned", "lead", {**spawned, "name": "ann", "prompt": "work", "role": "general"}),
        ("member.spawned", "lead", {**spawned, "name": "bob", "prompt": "p", "role": "tester"}),
        ("shutdown.requested", "lead", {"name": "bob", "request_id": rid}),
        ("cron.scheduled", "ann", {**CRON, "cron_id": view.cron_id}),
        ("cron.cancelled", "scheduler", {"cron_id": view.cron_id}),
    ]
    assert events[0][2]["name"] == "lead" and events[0][2]["model"] == models.lead
    assert [e[2]["subject"] for e in events[1:3]] == ["a", "b"]
    assert events[2][2]["blocked_by"] == ["task_1"]

    def mail(agent: str) -> list[tuple[str, str, str]]:
        # bob's own actor may already have answered the lead's request
        return [
            (e.sender, e.type, e.text) for e in team.inbox(agent) if e.type != "shutdown_response"
        ]

    asked = "lead asks you to shut down: finish your step, release or complete your task."
    assert mail("lead") == []
    assert mail("ann") == [("lead", "broadcast", "standup")]
    assert mail("bob") == [("lead", "broadcast", "standup"), ("lead", "shutdown_request", asked)]
    [request] = [e for e in team.inbox("bob") if e.type == "shutdown_request"]
    assert request.body["request_id"] == rid
