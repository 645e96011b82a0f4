"""The tool contract shared by built-in, team and MCP tools, and the policy seam.

A tool is a pydantic input model (→ JSON schema), three classifications, a permission request
describing what it is about to touch, and ``run``. The executor (``harness.tools.executor``) runs
the pipeline: parse → validate → policy.before (PreToolUse hooks + permission) → run →
policy.after (PostToolUse hooks) → normalise (size cap, spill) → ``ToolResultBlock``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from harness.errors import HarnessError
from harness.ports import ToolSpec, ToolUseBlock
from harness.shell.environment import CommandEnv, command_env_of

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
    (``plan`` allows only reads; ``acceptEdits`` allows writes inside the root); ``read_only``:
    the call may run in ``plan`` mode (``Tool.allowed_in_plan``).
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


@dataclass(frozen=True)
class FileStamp:
    """A file as an agent last saw it: size, modification time and content hash."""

    size: int
    mtime_ns: int
    sha256: str


def stamp_of(path: Path) -> FileStamp:
    """The current stamp of ``path`` (``OSError`` if it cannot be read)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        st = os.fstat(f.fileno())
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return FileStamp(st.st_size, st.st_mtime_ns, digest.hexdigest())


class FileReads:
    """The files one agent session has read, as they were then (read-before-edit and the
    stale-file check of ``write_file``/``edit_file``). Thread-safe: reads run in a pool."""

    def __init__(self) -> None:
        self._seen: dict[str, FileStamp] = {}
        self._lock = threading.Lock()

    def record(self, path: Path, stamp: FileStamp | None = None) -> None:
        """Remember ``path`` as the agent now knows it (after a read or its own write)."""
        try:
            stamp = stamp or stamp_of(path)
        except OSError:
            return
        with self._lock:
            self._seen[str(path)] = stamp

    def seen(self, path: Path) -> FileStamp | None:
        with self._lock:
            return self._seen.get(str(path))

    def changed_since_read(self, path: Path) -> bool | None:
        """``None`` if never read; else whether the file differs from what was read. A new
        modification time with the same content (``touch``, a checkout) is not a change."""
        old = self.seen(path)
        if old is None:
            return None
        try:
            st = path.stat()
            if (st.st_size, st.st_mtime_ns) == (old.size, old.mtime_ns):
                return False
            if st.st_size != old.size:
                return True
            now = stamp_of(path)
        except OSError:
            return True
        if now.sha256 != old.sha256:
            return True
        self.record(path, now)
        return False


class ReadGuard(Protocol):
    """Files deny rules keep from being read, for tools that walk directories (``glob``,
    ``grep``): they skip them. Implemented by ``harness.permissions.checks.Permissions``."""

    def denied_read(self, tool: str, path: Path, ctx: ToolContext) -> str | None:
        """The deny rule that forbids ``tool`` to read ``path`` (absolute), or ``None``."""
        ...


@dataclass
class ToolContext:
    """Where and for whom a call runs. ``root`` confines every path; ``cwd`` is inside it.

    ``file_reads`` belongs to this agent session (a subagent has its own context, so its own);
    the command environment is in ``extra`` (see ``command_env``), which subagents inherit."""

    agent: str
    root: Path
    cwd: Path
    session_id: str = ""
    outputs_dir: Path | None = None
    job_runner: JobRunner | None = None
    read_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    file_reads: FileReads = field(default_factory=FileReads)
    read_guard: ReadGuard | None = None
    """Set by the executor for one call from its ``PolicyVerdict`` (``None``: nothing denied)."""
    extra_roots: tuple[Path, ...] = ()
    """More directories file tools may work in besides ``root`` (``additionalDirectories``)."""

    def command_env(self) -> CommandEnv:
        """The environment policy of this agent's child processes (``harness.shell.environment``)."""
        return command_env_of(self.extra)


class Tool(ABC, Generic[In]):
    """One tool. Defaults: not read-only, not concurrency-safe, not destructive."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    ends_turn: ClassVar[bool] = False
    """A terminal tool: once it succeeds the model has nothing left to say, so a batch ending
    with it ends the turn without another model call (``harness.loop``)."""

    def is_read_only(self, args: In) -> bool:
        return False

    def is_concurrency_safe(self, args: In) -> bool:
        return False

    def is_destructive(self, args: In) -> bool:
        return False

    def allowed_in_plan(self, args: In) -> bool:
        """May run while the agent plans (plan mode, or a plan awaiting approval): read-only
        calls, and calls that change only what planning needs (a team tool's ``plan_safe``)."""
        return self.is_read_only(args)

    def permission_request(self, args: In, ctx: ToolContext) -> PermissionRequest:
        """Describe the call for rules and hooks (override for tools that touch paths)."""
        return PermissionRequest(
            tool=self.name,
            kind="read" if self.is_read_only(args) else "other",
            read_only=self.allowed_in_plan(args),
            destructive=self.is_destructive(args),
        )

    @abstractmethod
    def run(self, args: In, ctx: ToolContext) -> ToolOutput:
        """Execute; raise or return ``is_error=True`` on failure (both become a tool error)."""

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=input_schema(self.input_model),
        )


_SCHEMAS: dict[type[BaseModel], dict[str, Any]] = {}


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as the model sees it, made once per process (pydantic takes
    about a millisecond a model, and every agent of a team asks for the same tools')."""
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = _SCHEMAS[model] = plain_optionals(without_titles(model.model_json_schema()))
    return schema


def without_titles(schema: Any) -> Any:
    """A JSON schema without the ``title`` pydantic gives every model and field ("Path" for
    ``path``): the model sees the names and descriptions already, and every agent sends its
    tool schemas with each request. Property and definition *names* called ``title`` stay."""
    if isinstance(schema, list):
        return [without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: without_titles(sub) for name, sub in value.items()}
        else:
            out[key] = without_titles(value)
    return out


def plain_optionals(schema: Any) -> Any:
    """A JSON schema where an optional property that defaults to null (pydantic's
    ``{"anyOf": [X, {"type": "null"}], "default": null}``) is just ``X``: leaving the property out
    says the same, and every agent sends its tool schemas with each request. Validation still
    accepts an explicit null (it runs on the input model, not on this schema)."""
    if isinstance(schema, list):
        return [plain_optionals(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _plain_optional(sub) for name, sub in value.items()}
        else:
            out[key] = plain_optionals(value)
    return out


def _plain_optional(prop: Any) -> Any:
    prop = plain_optionals(prop)
    if not isinstance(prop, dict) or "default" not in prop or prop["default"] is not None:
        return prop
    options = prop.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return prop
    (kept,) = [o for o in options if o != {"type": "null"}]
    if not isinstance(kept, dict):
        return prop
    rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
    return kept | rest


Decision = Literal["allow", "deny", "ask"]


class BlockedResult(str):
    """A note ``ToolPolicy.after`` returns that also makes the result an error (a PostToolUse
    hook's block): the executor sets ``is_error`` and appends the note to the output."""


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
    read_guard: ReadGuard | None = None
    """Files the call must skip when it walks directories (the permission deny rules)."""


class ToolPolicy(Protocol):
    """Hooks and permissions around every call (implemented by ``harness.permissions.policy``)."""

    def before(
        self, call: ToolUseBlock, request: PermissionRequest, ctx: ToolContext
    ) -> PolicyVerdict:
        """PreToolUse hooks, then rules/mode/confinement, then the approver for ``ask``."""
        ...

    def after(self, call: ToolUseBlock, output: ToolOutput, ctx: ToolContext) -> str | None:
        """PostToolUse (or PostToolUseFailure when ``output.is_error``) hooks; returns additional
        context for the model or ``None``. A hook's block comes back as a ``BlockedResult``,
        which marks the result as an error."""
        ...


Approver = Callable[[PermissionRequest, ToolContext, str], bool]
"""Asked when a rule says ``ask``: returns True to allow. ``str`` is the reason shown."""
