"""``fold_all`` copies a map of the state only when the batch changes it: the maps a batch does
not touch are the input's own objects, and the input is never changed."""

from __future__ import annotations

from actors.board.fold import fold_all
from actors.board.state import TeamState
from mailboxes import events as ev
from tests.actors.board.test_state import Journal


def _team() -> tuple[Journal, TeamState]:
    j = Journal()
    j.add(ev.MemberSpawned(name="alice", role="dev"))
    j.task(1)
    j.task(2)
    j.add(ev.TaskClaimed(task_id="task_1", owner="alice", epoch=1), op_id="op-1")
    return j, j.state()


def test_a_claim_copies_only_the_maps_it_changes() -> None:
    j, before = _team()
    tasks, holdings = dict(before.tasks), dict(before.holdings)
    after = fold_all(before, [j.add(ev.TaskClaimed(task_id="task_2", owner="bob", epoch=1))])
    assert after.tasks is not before.tasks and after.holdings is not before.holdings
    assert after.tasks["task_2"].owner == "bob" and after.holdings["bob"] == "task_2"
    # Untouched: shared with the input, not copied.
    for name in ("members", "ops", "plan_requests", "worktrees", "agent_usage", "task_usage"):
        assert getattr(after, name) is getattr(before, name), name
    # The input is as it was.
    assert dict(before.tasks) == tasks and dict(before.holdings) == holdings


def test_a_member_event_leaves_the_task_map_shared_and_the_input_unchanged() -> None:
    j, before = _team()
    members = dict(before.members)
    event = j.add(ev.MemberStatusChanged(name="alice", status="idle"), op_id="op-2")
    after = fold_all(before, [event])
    assert after.tasks is before.tasks
    assert after.members["alice"].status == "idle" and after.ops["op-2"] == event.seq
    assert dict(before.members) == members and "op-2" not in before.ops
    # A map copied in the batch is read-only in the new state too.
    assert after.members is not before.members
    assert type(after.members).__name__ == "mappingproxy"


def test_several_events_on_one_map_in_a_batch_all_land() -> None:
    j, before = _team()
    batch = [
        j.add(ev.TaskCompleted(task_id="task_1", owner="alice", epoch=1, summary="ok")),
        j.add(ev.TaskClaimed(task_id="task_2", owner="alice", epoch=1)),
    ]
    after = fold_all(before, batch)
    assert after.tasks["task_1"].status == "completed"
    assert after.tasks["task_2"].owner == "alice" and after.holdings == {"alice": "task_2"}
    assert before.tasks["task_2"].status == "pending" and before.holdings == {"alice": "task_1"}
