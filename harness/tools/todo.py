"""``todo_write``: the agent's own task list, shown back to it, with a reminder when it goes stale.

The list lives in a ``TodoStore`` keyed by agent name (one store can serve many agents). The loop
calls ``note_step`` once per step and adds ``reminder(...)`` to its next input when it returns
text: after ``after_steps`` steps without a ``todo_write``, and every ``after_steps`` steps after.
"""

from __future__ import annotations

import threading
from typing import Literal

from pydantic import Field

from harness.tools.base import PermissionRequest, Tool, ToolContext, ToolOutput
from teamctl_base.models import Frozen

TodoStatus = Literal["pending", "in_progress", "completed"]

_MARK: dict[str, str] = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


class TodoItem(Frozen):
    content: str = Field(min_length=1, description="What to do, imperative ('Run the tests').")
    status: TodoStatus = Field("pending", description="pending, in_progress or completed.")
    active_form: str | None = Field(
        None, description="Present-continuous form shown while in progress ('Running the tests')."
    )


class TodoWriteInput(Frozen):
    todos: tuple[TodoItem, ...] = Field(description="The complete new list (replaces the old).")


def render_todos(items: tuple[TodoItem, ...]) -> str:
    """One line per item: ``[x]`` done, ``[>]`` in progress, ``[ ]`` pending."""
    if not items:
        return "(the todo list is empty)"
    lines = []
    for item in items:
        text = item.active_form if item.status == "in_progress" and item.active_form else None
        lines.append(f"{_MARK[item.status]} {text or item.content}")
    return "\n".join(lines)


class TodoStore:
    """Todo lists and steps-since-update counters per agent. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: dict[str, tuple[TodoItem, ...]] = {}
        self._steps: dict[str, int] = {}

    def set(self, agent: str, items: tuple[TodoItem, ...]) -> None:
        """Replace ``agent``'s list and reset its step counter."""
        with self._lock:
            self._lists[agent] = items
            self._steps[agent] = 0

    def get(self, agent: str) -> tuple[TodoItem, ...]:
        """``agent``'s current list (empty if never written)."""
        with self._lock:
            return self._lists.get(agent, ())

    def note_step(self, agent: str) -> None:
        """Count one completed step for ``agent`` (called by the loop)."""
        with self._lock:
            self._steps[agent] = self._steps.get(agent, 0) + 1

    def steps_since_update(self, agent: str) -> int:
        """Steps since ``agent`` last wrote its list (or since the start)."""
        with self._lock:
            return self._steps.get(agent, 0)

    def reminder(self, agent: str, *, after_steps: int) -> str | None:
        """A reminder text when the list is ``after_steps`` (a multiple) steps stale, else None."""
        steps = self.steps_since_update(agent)
        if after_steps <= 0 or steps == 0 or steps % after_steps:
            return None
        return (
            f"Reminder: the todo list has not been updated for {steps} steps. If you are working "
            "on a multi-step task, keep it current with todo_write (ignore this if not).\n"
            f"Current list:\n{render_todos(self.get(agent))}"
        )


class TodoWriteTool(Tool[TodoWriteInput]):
    name = "todo_write"
    description = (
        "Replace your todo list with the given items to plan and track multi-step work. Keep "
        "exactly one item in_progress; mark items completed as soon as they are done."
    )
    input_model = TodoWriteInput

    def __init__(self, store: TodoStore | None = None) -> None:
        self.store = store if store is not None else TodoStore()

    def is_read_only(self, args: TodoWriteInput) -> bool:
        return True  # touches only the agent's own in-memory list, so plan mode allows it

    def permission_request(self, args: TodoWriteInput, ctx: ToolContext) -> PermissionRequest:
        return PermissionRequest(tool=self.name, kind="other", read_only=True)

    def run(self, args: TodoWriteInput, ctx: ToolContext) -> ToolOutput:
        self.store.set(ctx.agent, args.todos)
        done = sum(item.status == "completed" for item in args.todos)
        active = sum(item.status == "in_progress" for item in args.todos)
        head = (
            f"Todo list updated ({len(args.todos)} items: {done} completed, {active} in "
            f"progress, {len(args.todos) - done - active} pending):"
        )
        text = f"{head}\n{render_todos(args.todos)}"
        if active > 1:
            text += "\nNote: more than one item is in_progress; keep exactly one."
        return ToolOutput(text)
