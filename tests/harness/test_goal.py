"""``harness.goal``: the judge at a stop (check command, evaluator, caps, deferral), the loop's
``goal_blocked``/``goal_failed`` transitions, and the fold that restores a goal from its records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.goal import GOAL_AGENT_SUFFIX, GOAL_SYSTEM, Goal, GoalJudge, GoalStatus
from harness.loop import LoopHooks
from tests.harness.loop_support import FakeModel, make_loop, reply


def judge_for(
    tmp_path: Path, model: Any, records: list[tuple[str, dict[str, Any]]], pending: list[int]
) -> GoalJudge:
    return GoalJudge(
        model=model,
        model_name="fake-model",
        agent="tester",
        cwd=lambda: tmp_path,
        env=lambda: {"PATH": "/usr/bin:/bin"},
        pending_work=lambda: pending[0],
        record=lambda kind, fields: records.append((kind, fields)),
        clock=lambda: 100.0,
    )


def test_the_loop_goes_on_until_the_check_passes(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    model = FakeModel([reply("Done."), reply("Still not."), reply("Now it is done.")])
    judge = judge_for(tmp_path, FakeModel([]), records, [0])
    judge.set(Goal(check="test -f flag"))
    seen: list[str] = []

    def verdict() -> Any:
        if len(seen) == 2:
            (tmp_path / "flag").write_text("")
        seen.append("stop")
        return judge.judge(loop.messages)

    loop = make_loop(tmp_path, model, hooks=LoopHooks(on_goal=verdict))
    result = loop.run_turn("make the flag")
    assert result.transition == "completed" and result.text == "Now it is done."
    blocked = [m for m in loop.messages if m.role == "user"][1:]
    assert len(blocked) == 2 and "goal check `test -f flag` failed" in str(blocked[0].content)
    assert [f["state"] for k, f in records if k == "goal.evaluated"] == ["active", "active", "met"]


def test_pending_background_work_defers_the_judgement(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    pending = [1]
    evaluator = FakeModel([reply('{"ok": true, "reason": "all green"}')])
    judge = judge_for(tmp_path, evaluator, records, pending)
    judge.set(Goal(condition="tests pass"))
    loop = make_loop(
        tmp_path,
        FakeModel([reply("Waiting for the job."), reply("The job passed.")]),
        hooks=LoopHooks(on_goal=lambda: judge.judge(loop.messages)),
    )
    assert loop.run_turn("run the tests").transition == "completed"
    assert evaluator.requests == [] and judge.active  # not judged, still set
    pending[0] = 0
    assert loop.run_turn("job finished").transition == "completed"
    [request] = evaluator.requests
    assert request.system[0].text == GOAL_SYSTEM and request.tools == ()
    assert request.agent == "tester" + GOAL_AGENT_SUFFIX
    assert "The job passed." in request.messages[0].content[0].text  # type: ignore[union-attr]
    assert judge.status.state == "met" and judge.status.evaluations == 1


def test_the_block_cap_fails_the_turn_as_unmet(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    judge = judge_for(tmp_path, FakeModel([]), records, [0])
    judge.set(Goal(check="exit 3", max_blocks=1))
    loop = make_loop(
        tmp_path,
        FakeModel([reply("Stop."), reply("Stop again.")]),
        hooks=LoopHooks(on_goal=lambda: judge.judge(loop.messages)),
    )
    result = loop.run_turn("go")
    assert result.transition == "goal_failed"
    assert result.error is not None and "after 1 blocked stops (the cap)" in result.error
    assert judge.status.state == "unmet"


def test_the_status_is_a_fold_over_the_records(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    evaluator = FakeModel([reply('{"ok": false, "reason": "no title", "impossible": false}')])
    judge = judge_for(tmp_path, evaluator, records, [0])
    judge.set(Goal(condition="README has a title"))
    judge.judge([])
    restored = GoalStatus()
    for kind, fields in records:
        restored.apply(kind, fields)
    assert restored.goal == judge.status.goal and restored.blocks == 1
    assert restored.last_reason == "no title" and restored.tokens == 15
    text = restored.describe(now=130.0)
    assert "goal: README has a title" in text and "evaluations: 1" in text
    assert "elapsed: 30s" in text and "last reason: no title" in text
    judge.clear()
    restored.apply(*records[-1])
    assert records[-1][0] == "goal.cleared" and restored.goal is None
    assert "no goal set" in restored.describe(now=0.0)
