"""The tool contract shared by built-in, team and MCP tools, and the policy seam.

A tool is a pydantic input model (→ JSON schema), three classifications, a permission request
describing what it is about to touch, and ``run``. The executor (``harness.tools.executor``) runs
the pipeline: parse → validate → policy.before (PreToolUse hooks + permission) → run →
policy.after (PostToolUse hooks) → normalise (size cap, spill) → ``ToolResultBlock``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from harness.errors import HarnessError
from harness.ports import ToolSpec, ToolUseBlock

In = TypeVar("In", bound=BaseModel)


class ToolError(HarnessError):
    """Raised by a tool to fail with a clean message (the model sees only the message)."""


AccessKind = Literal["read", "write", "shell", "network", "other"]


@dataclass(frozen=True)
class PermissionRequest:
    """What a call is about to do, for rules and hooks.

    ``tool`` is the name the model sees; ``target`` is the rule specifier subject (the command
    for ``bash``, the path for file tools, ``None`` when the tool has no subject); ``paths`` are
    every filesystem path the call touches (checked for confinement); ``kind`` drives modes
    (``plan`` allows only reads; ``acceptEdits`` allows writes inside the root).
    """

    tool: str
    kind: AccessKind
    target: str | None = None
    paths: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False


@dataclass(frozen=True)
class ToolOutput:
    """The raw result of ``Tool.run`` before normalisation."""

    content: str
    is_error: bool = False


class JobRunner(Protocol):
    """Starts a background command (the team runtime provides one; without it, refused)."""

    def start(self, command: str, *, cwd: Path, agent: str, timeout_s: float | None) -> str:
        """Start ``command`` in the background; returns the placeholder text for the model."""
        ...


@dataclass
class ToolContext:
    """Where and for whom a call runs. ``root`` confines every path; ``cwd`` is inside it."""

    agent: str
    root: Path
    cwd: Path
    session_id: str = ""
    outputs_dir: Path | None = None
    job_runner: JobRunner | None = None
    read_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Tool(ABC, Generic[In]):
    """One tool. Defaults: not read-only, not concurrency-safe, not destructive."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]

    def is_read_only(self, args: In) -> bool:
        return False

    def is_concurrency_safe(self, args: In) -> bool:
        return False

    def is_destructive(self, args: In) -> bool:
        return False

    def permission_request(self, args: In, ctx: ToolContext) -> PermissionRequest:
        """Describe the call for rules and hooks (override for tools that touch paths)."""
        return PermissionRequest(
            tool=self.name,
            kind="read" if self.is_read_only(args) else "other",
            read_only=self.is_read_only(args),
            destructive=self.is_destructive(args),
        )

    @abstractmethod
    def run(self, args: In, ctx: ToolContext) -> ToolOutput:
        """Execute; raise or return ``is_error=True`` on failure (both become a tool error)."""

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=self.input_model.model_json_schema(),
        )


Decision = Literal["allow", "deny", "ask"]


@dataclass(frozen=True)
class PolicyVerdict:
    """The outcome of the PreToolUse hooks + permission check for one call.

    ``decision`` is final here: ``ask`` has already been routed to an approver by the policy and
    turned into allow or deny. ``updated_input`` (from a hook) replaces the input when allowed.
    """

    decision: Literal["allow", "deny"]
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    additional_context: str | None = None


class ToolPolicy(Protocol):
    """Hooks and permissions around every call (implemented by ``harness.permissions.policy``)."""

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        """PreToolUse hooks, then rules/mode/confinement, then the approver for ``ask``."""
        ...

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        """PostToolUse (or PostToolUseFailure when ``output.is_error``) hooks; returns additional
        context for the model or ``None``. A hook's block here marks the result as an error."""
        ...


Approver = Callable[[PermissionRequest, ToolContext, str], bool]
"""Asked when a rule says ``ask``: returns True to allow. ``str`` is the reason shown."""
