"""The fake team (tests/actors/team_fakes.py) answers as the real runtime does: the same bad
input gives the same error (type and text) from ``FakeTeam`` and from a real ``TeamRuntime``'s
services, and the same good input the same journal events and messages. Tests of the team
tools and protocols run over the fake; this keeps what they assert true of the runtime."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec, TeamServices
from tests.actors.runtime.runtime_support import stop_actors, team_repo
from tests.actors.team_fakes import FakeTeam, Held, delivered, held_runtime, make_team

__all__ = ["stop_actors"]

SETTINGS = {"team": {"max_teammates": 2}}


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeTeam]:
    team = make_team(tmp_path / "fake" / "repo", SETTINGS)
    yield team
    team.close()


@pytest.fixture
def real(tmp_path: Path, stop_actors: list[Any]) -> Iterator[TeamRuntime]:
    (tmp_path / "real").mkdir()
    root = team_repo(tmp_path / "real")
    (root / ".team" / "settings.json").write_text(json.dumps(SETTINGS))
    model = Held()
    rt = held_runtime(root, model)
    stop_actors.append(rt)
    rt.start()
    try:
        yield rt
    finally:
        model.release.set()


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


BAD_INPUTS: dict[str, Call] = {
    "spawn an unsafe name": spawn("../x"),
    "spawn the lead's name": spawn("lead"),
    "spawn a live member again": spawn("ann"),
    "spawn a name differing in case": spawn("Ann"),
    "spawn a reserved name": spawn("runtime"),
    "spawn on a claimed task": spawn("cy", "task_1"),
    "spawn on a blocked task": spawn("cy", "task_2"),
    "spawn on an unknown task": spawn("cy", "task_9"),
    "send to an unknown member": send("zed"),
    "send to an unsafe name": send("../x"),
    "send an unknown message type": send("ann", "gossip"),
    "shut down an unknown member": lambda s: s.request_shutdown("zed", by="lead"),
    "shut down the lead": lambda s: s.request_shutdown("lead", by="ann"),
    "a cron with two fields": cron("* *"),
    "a cron minute out of range": cron("61 * * * *"),
    "a cron in an unknown zone": cron("0 9 * * *", tz="Mars/Olympus"),
    "a cron without a prompt": cron("0 9 * * *", prompt="  "),
    "cancel an unknown cron": lambda s: s.cancel_cron("cron_nope", by="lead"),
}


def given(services: TeamServices) -> None:
    """The same team on both sides: task_1 held by ann, task_2 blocked by it."""
    services.board.create("a")
    services.board.create("b", blocked_by=["task_1"])
    services.spawn_teammate(TeammateSpec(name="ann", prompt="work", task_id="task_1"), by="lead")


def test_bad_input_gets_the_runtimes_error_from_the_fake(fake: FakeTeam, real: TeamRuntime) -> None:
    given(fake)
    given(real.services)
    answers = {
        case: (outcome(fake, call), outcome(real.services, call))
        for case, call in BAD_INPUTS.items()
    }
    differ = {case: pair for case, pair in answers.items() if pair[0] != pair[1]}
    assert differ == {}
    assert all(real_answer[0] != "ok" for _, real_answer in answers.values()), answers
    # the texts are the runtime's, not generic ones
    assert answers["a cron with two fields"][1][1].startswith("cron expression '* *' has 2 fields")
    assert answers["spawn on a claimed task"][1][1] == (
        "could not claim task task_1: already claimed by ann"
    )
    assert answers["shut down the lead"][1] == ("UnknownMember", "unknown team member 'lead'")
    # the team limit, counted the same way (ann and bob are the two allowed)
    assert outcome(fake, spawn("bob")) == outcome(real.services, spawn("bob")) == ("ok", "")
    limit = ("TeamError", "the team already has 2 teammates")
    assert outcome(fake, spawn("cy")) == outcome(real.services, spawn("cy")) == limit


def inbox(team: FakeTeam | TeamRuntime, agent: str) -> list[tuple[str, str, str]]:
    """Every message delivered to ``agent``, read or not: (sender, type, text)."""
    mailbox = team.mailbox if isinstance(team, FakeTeam) else team.team.mailbox
    return [(e.sender, e.type, e.text) for e in delivered(mailbox, agent)]


SERVICE_EVENTS = {
    "team.created",
    "task.created",
    "task.claimed",
    "member.spawned",
    "shutdown.requested",
    "cron.scheduled",
    "cron.cancelled",
}
"""What the services journal (the real members' actors add their own progress)."""


def test_good_input_gives_the_runtimes_events_messages_and_views(
    fake: FakeTeam, real: TeamRuntime
) -> None:
    def act(services: TeamServices) -> dict[str, Any]:
        given(services)
        services.spawn_teammate(TeammateSpec(name="bob", role="tester", prompt="p"), by="lead")
        services.send("lead", "*", "broadcast", {"text": "standup"})
        services.request_shutdown("bob", by="lead")
        view = services.schedule_cron("*/5 * * * *", "check", recurring=False, tz=None, owner="ann")
        listed = [
            (v.cron_id, v.cron, v.prompt, v.recurring, v.owner) for v in services.list_crons()
        ]
        services.cancel_cron(view.cron_id, by="lead")
        services.cancel_cron(view.cron_id, by="lead")  # twice: no error, one event
        events = [
            (e.type, e.actor, {k: v for k, v in e.data.items() if k != "request_id"})
            for e in services.journal.read_from(1)
            if e.type in SERVICE_EVENTS
        ]
        return {
            "view": (view.cron, view.prompt, view.recurring, view.owner, view.status),
            "listed": [row[1:] for row in listed],
            "crons after cancel": services.list_crons(),
            "members": [(m.name, m.kind, m.role, m.task_id, m.model) for m in services.members()],
            "events": [
                (t, a, {k: v for k, v in d.items() if k != "cron_id"}) for t, a, d in events
            ],
        }

    mine, theirs = act(fake), act(real.services)
    assert mine == theirs
    for agent in ("lead", "ann", "bob"):
        # what the services sent (the real bob may already have answered the lead)
        sent = [m for m in inbox(real, agent) if m[1] != "shutdown_response"]
        assert inbox(fake, agent) == sent, agent
    shutdown_text = "lead asks you to shut down: finish your step, release or complete your task."
    assert inbox(real, "bob")[-1] == ("lead", "shutdown_request", shutdown_text)
    assert [t for t, _, _ in theirs["events"]].count("cron.cancelled") == 1
