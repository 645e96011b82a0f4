"""Helpers for the runtime and actor tests: a team in a real git repository, stand-in team tools
(the minimal set the actor tests need, independent of ``actors.tools.toolsets``) and a runtime builder."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pykka
import pytest
from pydantic import BaseModel, ConfigDict

from actors.factory import init_team
from actors.runtime.runtime import TeamRuntime
from actors.services import TeammateSpec, TeamServices
from harness.model.scripted import ScriptedModel
from harness.ports import ModelClient, ModelRequest, ModelResponse
from harness.tools.base import Tool, ToolContext, ToolError, ToolOutput


def team_repo(tmp_path: Path) -> Path:
    """A fresh git repository with ``.team`` initialised."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_team(root)
    return root


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateIn(_In):
    subject: str
    description: str = ""
    blocked_by: list[str] = []


class SpawnIn(_In):
    name: str
    role: str = "general"
    prompt: str = ""
    task_id: str | None = None


class CompleteIn(_In):
    task_id: str
    summary: str = ""


class SendIn(_In):
    to: str
    text: str


class EmptyIn(_In):
    pass


class _TeamTool(Tool[Any]):
    def __init__(self, services: TeamServices, agent: str) -> None:
        self.services = services
        self.agent = agent


class CreateTask(_TeamTool):
    name: ClassVar[str] = "create_task"
    description: ClassVar[str] = "Create a task."
    input_model: ClassVar[type[BaseModel]] = CreateIn

    def run(self, args: CreateIn, ctx: ToolContext) -> ToolOutput:
        task = self.services.board.create(
            args.subject, args.description, blocked_by=args.blocked_by
        )
        return ToolOutput(f"created {task.id}")


class SpawnTeammate(_TeamTool):
    name: ClassVar[str] = "spawn_teammate"
    description: ClassVar[str] = "Spawn a teammate."
    input_model: ClassVar[type[BaseModel]] = SpawnIn

    def run(self, args: SpawnIn, ctx: ToolContext) -> ToolOutput:
        spec = TeammateSpec(name=args.name, role=args.role, prompt=args.prompt)
        if args.task_id:
            spec = TeammateSpec(name=args.name, role=args.role, task_id=args.task_id)
        view = self.services.spawn_teammate(spec, by=self.agent)
        return ToolOutput(f"spawned {view.name}")


class CompleteTask(_TeamTool):
    name: ClassVar[str] = "complete_task"
    description: ClassVar[str] = "Complete your task."
    input_model: ClassVar[type[BaseModel]] = CompleteIn

    def run(self, args: CompleteIn, ctx: ToolContext) -> ToolOutput:
        board = self.services.board
        task = board.refresh().task(args.task_id)
        board.complete(args.task_id, self.agent, task.epoch, args.summary)
        return ToolOutput(f"completed {args.task_id}")


class SendMessage(_TeamTool):
    name: ClassVar[str] = "send_message"
    description: ClassVar[str] = "Send a message."
    input_model: ClassVar[type[BaseModel]] = SendIn

    def run(self, args: SendIn, ctx: ToolContext) -> ToolOutput:
        self.services.send(self.agent, args.to, "message", {"text": args.text})
        return ToolOutput(f"sent to {args.to}")


class SystemExitTool(_TeamTool):
    name: ClassVar[str] = "exit_now"
    description: ClassVar[str] = "Raises SystemExit."
    input_model: ClassVar[type[BaseModel]] = EmptyIn

    def run(self, args: EmptyIn, ctx: ToolContext) -> ToolOutput:
        raise SystemExit(3)


class Gate:
    """A tool that blocks until released (a teammate stuck in a step)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


def stuck_tool(gate: Gate) -> type[_TeamTool]:
    class StuckTool(_TeamTool):
        name: ClassVar[str] = "stuck"
        description: ClassVar[str] = "Blocks."
        input_model: ClassVar[type[BaseModel]] = EmptyIn

        def run(self, args: EmptyIn, ctx: ToolContext) -> ToolOutput:
            gate.entered.set()
            if not gate.release.wait(30):
                raise ToolError("gate never released")
            return ToolOutput("unstuck")

    return StuckTool


def tools_with(*extra: type[_TeamTool]) -> Any:
    """A tools factory: the stand-in team tools plus ``extra``."""

    def factory(services: TeamServices, agent: str, kind: str) -> Sequence[Tool[Any]]:
        common: list[Tool[Any]] = [SendMessage(services, agent)]
        if kind == "lead":
            common += [CreateTask(services, agent), SpawnTeammate(services, agent)]
        else:
            common += [CompleteTask(services, agent)]
        return common + [cls(services, agent) for cls in extra]

    return factory


class FailingModel:
    """Delegates to a scripted model, except for ``failing`` agents, whose calls raise."""

    def __init__(self, inner: ScriptedModel, failing: set[str]) -> None:
        self.inner = inner
        self.failing = failing
        self.failed_calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        from harness.errors import ModelError

        if request.agent in self.failing:
            with self._lock:
                self.failed_calls[request.agent] = self.failed_calls.get(request.agent, 0) + 1
            raise ModelError("overloaded: the model is unavailable")
        return self.inner.complete(request)


class Events:
    """Collects runtime events (thread-safe)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self.items.append(dict(event))

    def of(self, type_: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.items if e["type"] == type_]


def runtime(root: Path, model: ModelClient, **kwargs: Any) -> TeamRuntime:
    """A runtime with the stand-in tools, no scheduler, jobs or worktrees, fast transcripts."""
    kwargs.setdefault("tools", tools_with())
    kwargs.setdefault("scheduler", False)
    kwargs.setdefault("jobs", False)
    kwargs.setdefault("worktrees", False)
    kwargs.setdefault("fsync_transcripts", False)
    return TeamRuntime(root, model=model, **kwargs)


@pytest.fixture
def stop_actors() -> Iterator[list[TeamRuntime]]:
    """Runtimes appended here are stopped after the test, then every actor."""
    started: list[TeamRuntime] = []
    yield started
    for rt in started:
        rt.stop()
    pykka.ActorRegistry.stop_all()
