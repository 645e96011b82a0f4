"""``actors/runtime/usage.py``: every model call journaled with its billed usage and cost, charged
to the task its agent holds; the caps of the ``team`` settings (pure ``find_cap`` and the
runtime's ``UsageMeter`` on a real journal)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.board.fold import fold_all
from actors.board.state import EMPTY, TeamState
from actors.factory import Team, open_team
from actors.runtime.usage import CapHit, UsageMeter, find_cap
from actors.services import TeammateSpec
from actors.settings import Settings, TeamSettings
from harness.model.scripted import ScriptedModel
from harness.ports import Message, ModelRequest, ModelResponse, TextBlock, Usage
from mailboxes import events as ev
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo
from tests.actors.runtime.test_stalls import ManualTimer

__all__ = ["stop_actors"]


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    opened = open_team(team_repo(tmp_path), actor="runtime")
    yield opened
    opened.close()


def _response(model: str, usage: Usage, billed: Usage | None = None) -> ModelResponse:
    return ModelResponse(
        id="msg_1",
        model=model,
        content=(TextBlock(text="hi"),),
        stop_reason="end_turn",
        usage=usage,
        billed=billed,
    )


def _recorded(team: Team) -> list[ev.UsageRecorded]:
    found = []
    for event in team.journal.read_from(1):
        if event.type == "usage.recorded":
            body = ev.payload(event)
            assert isinstance(body, ev.UsageRecorded) and event.actor == body.agent
            found.append(body)
    return found


def test_each_call_is_journaled_with_its_billed_usage_cost_and_the_task_held(team: Team) -> None:
    board = team.board
    task = board.create("one")
    meter = UsageMeter(board, TeamSettings())
    last = Usage(input_tokens=10, output_tokens=5)
    billed = Usage(input_tokens=30, output_tokens=50, cache_read_input_tokens=200)
    meter.record("w1", _response("claude-sonnet-4-6", last, billed))  # holding nothing yet
    assert board.claim(task.id, "w1").ok
    meter.record("w1", _response("claude-sonnet-4-6", last))
    meter.record("lead", _response("a-model-without-a-price", last))
    first, second, third = _recorded(team)
    assert (first.task_id, first.input_tokens, first.output_tokens) == (None, 30, 50)
    assert first.cache_read_input_tokens == 200  # the bill of the whole call, not the last part
    assert first.cost_usd == pytest.approx((30 * 3 + 50 * 15 + 200 * 0.3) / 1e6)
    assert (second.task_id, second.input_tokens, second.output_tokens) == (task.id, 10, 5)
    assert (third.agent, third.cost_usd) == ("lead", None)  # unknown price: no guess
    state = board.refresh()
    assert state.task_usage[task.id].calls == 1 and state.usage.calls == 3
    assert state.usage.unpriced_calls == 1


def test_the_metered_client_records_every_call_of_its_agent(team: Team) -> None:
    meter = UsageMeter(team.board, TeamSettings())
    usage = {"input_tokens": 7, "output_tokens": 3}
    script = {"agents": {"w1": {"rules": [{"match": "(?s).", "text": "ok", "usage": usage}]}}}
    client = meter.client("w1", ScriptedModel(script))
    request = ModelRequest(
        model="claude-haiku-4-5",
        messages=(Message(role="user", content=(TextBlock(text="go"),)),),
        agent="w1",
    )
    for _ in range(3):
        assert client.complete(request).usage.input_tokens == 7
    calls = _recorded(team)
    assert [(c.agent, c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("w1", "claude-haiku-4-5", 7, 3)
    ] * 3
    assert team.board.refresh().agent_usage["w1"].cost_usd == pytest.approx(3 * (7 + 15) / 1e6)


def _state(*calls: tuple[str, str | None, int, float]) -> TeamState:
    """A state with task_1 held by w1 and ``calls`` of (agent, task, input tokens, cost)."""
    events: list[ev.Event] = []

    def add(body: ev.Payload, actor: str = "lead") -> None:
        events.append(
            ev.Event(
                seq=len(events) + 1,
                ts=1.0,
                type=body.TYPE,
                actor=actor,
                data=body.model_dump(mode="json"),
            )
        )

    add(ev.TaskCreated(task_id="task_1", subject="one"))
    add(ev.TaskClaimed(task_id="task_1", owner="w1", epoch=1))
    for agent, task, tokens, cost in calls:
        add(
            ev.UsageRecorded(
                agent=agent, model="m", task_id=task, input_tokens=tokens, cost_usd=cost
            ),
            agent,
        )
    return fold_all(EMPTY, events)


def test_find_cap_names_the_first_cap_reached() -> None:
    state = _state(("lead", None, 600, 0.5), ("w1", "task_1", 300, 0.25))
    assert find_cap(state, TeamSettings(), "w1", turn_tokens=10**9) is None  # no caps: never
    hit = find_cap(state, TeamSettings(max_cost_usd=0.75), "lead")
    assert hit == CapHit("team.max_cost_usd", 0.75, 0.75, "lead")
    assert find_cap(state, TeamSettings(max_cost_usd=0.76), "lead") is None
    hit = find_cap(state, TeamSettings(max_tokens=900), "w1")
    assert hit is not None and (hit.setting, hit.spent) == ("team.max_tokens", 900)
    per_task = TeamSettings(max_turns_per_task=1)
    hit = find_cap(state, per_task, "w1")
    assert hit is not None and (hit.setting, hit.task_id, hit.spent) == (
        "team.max_turns_per_task",
        "task_1",
        1,
    )
    assert find_cap(state, per_task, "lead") is None  # the lead holds no task
    per_turn = TeamSettings(max_tokens_per_turn=500)
    assert find_cap(state, per_turn, "w1", turn_tokens=499) is None
    hit = find_cap(state, per_turn, "w1", turn_tokens=500)
    assert hit is not None and hit.setting == "team.max_tokens_per_turn"


def test_a_cap_line_names_the_setting_the_file_and_how_to_go_on() -> None:
    hit = CapHit("team.max_turns_per_task", 5, 5, "w1", "task_3")
    assert hit.line() == (
        "cap reached: w1 made 5 model calls on task_3 (team.max_turns_per_task 5); raise "
        "team.max_turns_per_task in .team/settings.json and run `teamctl resume`"
    )
    event = hit.as_event()
    assert event["type"] == "cap_reached" and event["message"] == hit.line()


def test_the_meter_stops_an_agent_at_its_turn_budget_and_counts_each_turn_afresh(
    team: Team,
) -> None:
    hits: list[CapHit] = []
    meter = UsageMeter(team.board, TeamSettings(max_tokens_per_turn=100), on_hit=hits.append)
    call = _response("claude-haiku-4-5", Usage(input_tokens=60))
    assert meter.check("w1", (0, 1)) is None
    meter.record("w1", call)
    assert meter.check("w1", (0, 1)) is None  # 60 tokens in this turn
    meter.record("w1", call)
    hit = meter.check("w1", (0, 1))
    assert hit is not None and (hit.setting, hit.spent) == ("team.max_tokens_per_turn", 120)
    assert meter.check("w2", (0, 1)) is None  # another agent's turn is its own
    assert meter.check("w1", (0, 2)) is None  # a new turn starts from nothing
    assert meter.reached() == hit
    assert meter.check("w1", (0, 1)) is None  # the turn key changed: counted afresh
    meter.record("w1", call)
    meter.record("w1", call)
    assert meter.check("w1", (0, 1)) is not None
    assert hits == [hit]  # told once per agent and setting


def test_the_team_budget_stops_every_agent_and_counts_other_processes_calls(team: Team) -> None:
    hits: list[CapHit] = []
    meter = UsageMeter(team.board, TeamSettings(max_tokens=100), on_hit=hits.append)
    assert meter.check("lead", 1) is None
    other = open_team(team.repo.root, actor="w9")  # e.g. `teamctl join` in another process
    try:
        UsageMeter(other.board, TeamSettings()).record(
            "w9", _response("claude-haiku-4-5", Usage(input_tokens=70, output_tokens=30))
        )
    finally:
        other.close()
    lead, mate = meter.check("lead", 1), meter.check("w1", 1)
    assert lead is not None and mate is not None
    assert (lead.setting, lead.spent, mate.agent) == ("team.max_tokens", 100, "w1")
    assert [h.agent for h in hits] == ["lead", "w1"]


def test_without_a_journal_cap_the_check_before_a_call_does_not_read_the_journal(
    team: Team,
) -> None:
    # Only the team budgets and max_turns_per_task need the journal; without them the check
    # before each model call must not wait for the journal (a commit of another agent in flight).
    board = team.board
    seen = board.refresh().seq
    other = open_team(team.repo.root, actor="w9")
    try:
        other.board.create("appended by another process")
    finally:
        other.close()
    assert UsageMeter(board, TeamSettings(max_tokens_per_turn=100)).check("w1", 1) is None
    assert board.state.seq == seen  # not read
    assert UsageMeter(board, TeamSettings(max_turns_per_task=5)).check("w1", 1) is None
    assert board.state.seq > seen  # a journal cap reads it


def test_a_teammate_held_back_by_a_cap_is_not_taken_for_stalled(
    tmp_path: Path, stop_actors: list[Any]
) -> None:
    root = team_repo(tmp_path)
    noted = [{"match": "(?s).", "text": "Noted."}, {"match": "^$", "text": "Noted."}]
    script = {"agents": {"lead": {"rules": noted}, "w1": {"rules": [
        {"match": "(?s).", "text": "Working on it."}, {"match": "^$", "text": "Working on it."}
    ]}}}  # fmt: skip
    timer = ManualTimer()
    settings = Settings(team=TeamSettings(stall_timeout_s=42, max_turns_per_task=1))
    rt = runtime(root, ScriptedModel(script), settings=settings, idle_timer=timer)
    stop_actors.append(rt)
    rt.start()
    rt.board.create("first")
    rt.services.spawn_teammate(TeammateSpec(name="w1", task_id="task_1"), by="lead")
    # One call on task_1, the turn ends holding it, the reminder's call is held back by the cap.
    assert rt.wait_until(lambda: rt.cap_reached() is not None, 30)
    hit = rt.cap_reached()
    assert hit is not None and (hit.setting, hit.agent, hit.task_id) == (
        "team.max_turns_per_task",
        "w1",
        "task_1",
    )
    assert timer.fire(42) >= 1  # the watchdog looks: no step finished, but it waits for a person
    assert rt.board.refresh().members["w1"].status != "stalled"
    assert rt.board.refresh().task_usage["task_1"].calls == 1
    assert not rt.is_idle()  # held back, not done


class _Probe:
    """A model that answers at once and notes, at each call, the usage records journaled."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.seen: list[int] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.seen.append(len(_recorded(self.team)))
        return _response("claude-haiku-4-5", Usage(input_tokens=7, output_tokens=3))


def _request(agent: str) -> ModelRequest:
    return ModelRequest(
        model="claude-haiku-4-5",
        messages=(Message(role="user", content=(TextBlock(text="go"),)),),
        agent=agent,
    )


def test_a_record_is_durable_before_the_agents_next_model_call(team: Team) -> None:
    from actors.runtime.commits import DEFER_S, SharedCommits

    timer = ManualTimer()
    meter = UsageMeter(team.board, TeamSettings(), commits=SharedCommits(team.board, timer=timer))
    probe = _Probe(team)
    client = meter.client("w1", probe)
    for _ in range(3):
        client.complete(_request("w1"))
    # Each call found every earlier call journaled; the last one's record waits for a write
    # to carry it, or its timer.
    assert probe.seen == [0, 1, 2]
    assert len(_recorded(team)) == 2
    assert timer.fire(DEFER_S) == 1
    assert len(_recorded(team)) == 3


def test_the_cap_check_counts_the_agents_last_call(team: Team) -> None:
    from actors.runtime.commits import SharedCommits

    caps = TeamSettings(max_tokens=10)
    meter = UsageMeter(team.board, caps, commits=SharedCommits(team.board, timer=ManualTimer()))
    meter.record("w1", _response("claude-haiku-4-5", Usage(input_tokens=7, output_tokens=3)))
    hit = meter.check("w1", turn=1)
    assert hit is not None and hit.setting == "team.max_tokens" and hit.spent == 10


def test_a_deferred_record_is_charged_to_the_task_held_when_the_call_returned(team: Team) -> None:
    from actors.runtime.commits import SharedCommits

    board = team.board
    task = board.create("one")
    claimed = board.claim(task.id, "w1")
    assert claimed.ok
    meter = UsageMeter(board, TeamSettings(), commits=SharedCommits(board, timer=ManualTimer()))
    meter.record("w1", _response("claude-haiku-4-5", Usage(input_tokens=7, output_tokens=3)))
    # Its own release is committed before the record is.
    board.release(task.id, "w1", claimed.epoch, "blocked")
    meter.settle("w1")
    (record,) = _recorded(team)
    assert record.task_id == task.id
    assert board.refresh().task_usage[task.id].calls == 1
