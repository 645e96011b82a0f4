"""todo_write: the list is stored per agent, shown back, and a reminder comes when it is stale."""

from __future__ import annotations

from pathlib import Path

from harness.ports import ToolUseBlock
from harness.tools.base import ToolContext
from harness.tools.executor import ToolExecutor
from harness.tools.registry import ToolRegistry
from harness.tools.todo import TodoItem, TodoStore, TodoWriteInput, TodoWriteTool, render_todos
from tests.support.fakes import AllowAll

TODOS = [
    {"content": "Read the code", "status": "completed"},
    {"content": "Fix the bug", "status": "in_progress", "active_form": "Fixing the bug"},
    {"content": "Run the tests"},
]


def test_todo_write_stores_and_shows_the_list(tmp_path: Path) -> None:
    store = TodoStore()
    ex = ToolExecutor(ToolRegistry([TodoWriteTool(store)]), AllowAll())
    ctx = ToolContext(agent="ann", root=tmp_path, cwd=tmp_path)
    [r] = ex.run_batch([ToolUseBlock(id="1", name="todo_write", input={"todos": TODOS})], ctx)
    assert not r.is_error
    assert r.content == (
        "Todo list updated (3 items: 1 completed, 1 in progress, 1 pending):\n"
        "[x] Read the code\n[>] Fixing the bug\n[ ] Run the tests"
    )
    assert [item.content for item in store.get("ann")] == [t["content"] for t in TODOS]
    assert store.get("bob") == ()


def test_todo_write_validates_and_warns(tmp_path: Path) -> None:
    ex = ToolExecutor(ToolRegistry([TodoWriteTool()]), AllowAll())
    ctx = ToolContext(agent="ann", root=tmp_path, cwd=tmp_path)
    bad = {"todos": [{"content": "x", "status": "done"}]}
    two = {
        "todos": [
            {"content": "a", "status": "in_progress"},
            {"content": "b", "status": "in_progress"},
        ]
    }
    r_bad, r_two = ex.run_batch(
        [
            ToolUseBlock(id="1", name="todo_write", input=bad),
            ToolUseBlock(id="2", name="todo_write", input=two),
        ],
        ctx,
    )
    assert r_bad.is_error and "todos.0.status" in r_bad.content
    assert not r_two.is_error and "more than one item is in_progress" in r_two.content


def test_todo_write_is_allowed_in_plan_mode(tmp_path: Path) -> None:
    ex = ToolExecutor(ToolRegistry([TodoWriteTool()]), AllowAll())
    ctx = ToolContext(agent="ann", root=tmp_path, cwd=tmp_path, read_only=True)
    [r] = ex.run_batch([ToolUseBlock(id="1", name="todo_write", input={"todos": []})], ctx)
    assert not r.is_error and r.content.endswith("(the todo list is empty)")


def test_steps_since_update_and_reminder_cadence() -> None:
    store = TodoStore()
    items = TodoWriteInput.model_validate({"todos": TODOS}).todos
    store.set("ann", items)
    reminders = []
    for _ in range(7):
        store.note_step("ann")
        reminders.append(store.reminder("ann", after_steps=3))
    assert store.steps_since_update("ann") == 7
    assert [r is not None for r in reminders] == [False, False, True, False, False, True, False]
    assert reminders[2] is not None and "not been updated for 3 steps" in reminders[2]
    assert render_todos(items) in reminders[2]
    store.set("ann", (TodoItem(content="new"),))
    assert store.steps_since_update("ann") == 0 and store.reminder("ann", after_steps=3) is None
    assert store.steps_since_update("bob") == 0
    assert store.reminder("ann", after_steps=0) is None
