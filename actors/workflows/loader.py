"""Finding and loading workflow files (docs/ARCHITECTURE.md, "Workflows").

A workflow is a Python file ``.team/workflows/<name>.py`` (or one of the packaged
``actors/workflows/examples/``; a project file of the same name wins) defining::

    META = {"name": "review", "description": "...", "phases": ["audit", "merge"]}

    async def run(ctx, args):
        ...

It is loaded with ``importlib`` from its path, so it runs as trusted project code, like a hook
command. Anything wrong with it (does not import, raises while importing, lacks ``META`` or
``run``, an unsafe name, a name that differs from its file's) is one ``WorkflowError`` naming
the file and, where there is one, the line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.errors import TeamError

SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""A workflow name: lowercase letters, digits, ``-`` and ``_``, at most 64 characters."""
EXAMPLES = Path(__file__).parent / "examples"
"""The workflows shipped with teamctl."""

RunFunction = Callable[[Any, Any], Awaitable[Any]]


class WorkflowError(TeamError):
    """A workflow that cannot be loaded or run as asked (one clear line)."""


@dataclass(frozen=True)
class Workflow:
    """A loaded workflow file."""

    name: str
    description: str
    phases: tuple[str, ...]
    path: Path
    sha256: str
    run: RunFunction


def check_name(name: str) -> str:
    """``name`` when it is a safe workflow name, else ``WorkflowError``."""
    if not SAFE_NAME.match(name):
        raise WorkflowError(
            f"unsafe workflow name {name!r}: use lowercase letters, digits, '-' and '_' "
            "(at most 64 characters, starting with a letter or digit)"
        )
    return name


def workflow_dirs(repo_root: Path) -> tuple[Path, ...]:
    """Where workflows are looked for, highest precedence first."""
    return (repo_root / ".team" / "workflows", EXAMPLES)


def find_workflow(repo_root: Path, name: str) -> Path:
    """The file of workflow ``name`` (``WorkflowError`` when there is none)."""
    check_name(name)
    for folder in workflow_dirs(repo_root):
        path = folder / f"{name}.py"
        if path.is_file():
            return path
    raise WorkflowError(
        f"no workflow named {name!r} (looked in .team/workflows/ and the examples; "
        "`teamctl workflow list` shows them)"
    )


def list_workflows(repo_root: Path) -> list[Workflow | WorkflowError]:
    """Every workflow by name (a project file hides an example of the same name), each loaded,
    or the error that loading it raised."""
    seen: dict[str, Path] = {}
    for folder in workflow_dirs(repo_root):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py")):
            if path.stem.startswith("_"):
                continue
            seen.setdefault(path.stem, path)
    found: list[Workflow | WorkflowError] = []
    for _stem, path in sorted(seen.items()):
        try:
            found.append(load_workflow(path))
        except WorkflowError as exc:
            found.append(exc)
    return found


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def where(path: Path, exc: BaseException) -> str:
    """``file:line`` of the deepest frame of ``exc`` inside ``path`` (or just the file)."""
    line: int | None = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None:
        for frame in traceback.extract_tb(exc.__traceback__):
            if Path(frame.filename) == path:
                line = frame.lineno
    return f"{path}:{line}" if line else str(path)


def load_workflow(path: Path) -> Workflow:
    """Import ``path`` and check its ``META`` and ``run``."""
    path = path.resolve()
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise WorkflowError(f"{path}: cannot read the workflow: {exc.strerror}") from None
    module_name = f"teamctl_workflow_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise WorkflowError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        code = compile(source, str(path), "exec")
        exec(code, module.__dict__)
    except Exception as exc:
        raise WorkflowError(
            f"{where(path, exc)}: the workflow does not import: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        sys.modules.pop(module_name, None)
    meta = module.__dict__.get("META")
    run = module.__dict__.get("run")
    if not isinstance(meta, dict):
        raise WorkflowError(f"{path}: a workflow needs META = {{'name': ..., 'description': ...}}")
    if run is None or not inspect.iscoroutinefunction(run):
        raise WorkflowError(f"{path}: a workflow needs `async def run(ctx, args)`")
    name = meta.get("name")
    if not isinstance(name, str):
        raise WorkflowError(f"{path}: META['name'] must be a string")
    check_name(name)
    if name != path.stem:
        raise WorkflowError(f"{path}: META['name'] is {name!r} but the file is {path.stem}.py")
    description = meta.get("description", "")
    phases = meta.get("phases", ())
    if not isinstance(description, str):
        raise WorkflowError(f"{path}: META['description'] must be a string")
    if not isinstance(phases, list | tuple) or not all(isinstance(p, str) for p in phases):
        raise WorkflowError(f"{path}: META['phases'] must be a list of strings")
    return Workflow(
        name=name,
        description=description,
        phases=tuple(phases),
        path=path,
        sha256=hashlib.sha256(source).hexdigest(),
        run=run,
    )
