"""The packages import, and the layering rule holds.

``import_violations(root)`` reads every module of the four packages under ``root`` and reports:

- an import across packages that ``PACKAGE_DEPS`` does not allow;
- an import inside ``actors`` from a lower layer of ``ACTORS_LAYERS`` to a higher one, or
  between two units of the same layer;
- every cycle of the module import graph.

It sees every import: at module level, inside a function, under ``TYPE_CHECKING``, and by
string (``importlib.import_module("actors.jobs.actor")``, ``__import__("actors")``). Imports
under ``TYPE_CHECKING`` count for the layering (a type is a dependency too) but not for cycles
(they never run). The same function runs on the real tree and, to show that it fails, on a small
synthetic tree with one violation of each kind.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PACKAGE_DEPS: dict[str, frozenset[str]] = {
    "teamctl_base": frozenset(),
    "mailboxes": frozenset({"teamctl_base"}),
    "harness": frozenset({"teamctl_base"}),
    "actors": frozenset({"teamctl_base", "mailboxes", "harness"}),
}
"""The packages each package may import besides itself: ``teamctl_base`` is the bottom layer,
``mailboxes`` and ``harness`` never import each other, ``actors`` is on top."""

ACTORS_LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "messages", "backend"),
    ("repo", "settings", "board"),
    ("factory", "jobs", "worktrees"),
    ("services",),
    ("protocols", "workflows"),
    ("tools",),
    ("runtime", "live"),
    ("scenarios", "web"),
    ("cli",),
)
"""The units of ``actors`` (subpackages and top-level modules), lowest layer first. A unit imports
only units of lower layers; units of one layer do not import each other.

=====  =================================  ======================================================
layer  units                              what they are
=====  =================================  ======================================================
1      ``errors``, ``messages``,          the error family; the actors' message values; which
       ``backend``                        backend a team is on
2      ``repo``, ``settings``, ``board``  the repository and its settings; team state, the fold,
                                          the task board and the protocols' journal commands
3      ``factory``, ``jobs``,             a team's durable objects; background jobs and cron;
       ``worktrees``                      the Worktrees actor and git
4      ``services``                       the seam between the runtime and the team tools
5      ``protocols``                      plan approval and shutdown between members
6      ``tools``                          the team tools agents call
7      ``runtime``, ``live``              the team runtime and its actors; the live view
8      ``scenarios``, ``web``             scripted scenarios, runner, checker, demo; the web
                                          dashboard's server and JSON API
9      ``cli``                            the command line: may import everything
=====  =================================  ======================================================
"""


@dataclass(frozen=True)
class Import:
    """One import found in a module: what it names, where, and how."""

    source: str
    target: str
    path: Path
    line: int
    how: str
    """``at module level``, ``inside a function``, ``by string`` or ``under TYPE_CHECKING``."""

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}: {self.source} imports {self.target}"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Finder(ast.NodeVisitor):
    """Collects the imports of one module, with the context each one is in."""

    def __init__(self, modules: set[str], module: str, path: Path) -> None:
        self.modules, self.module, self.path = modules, module, path
        self.is_package = path.name == "__init__.py"
        self.found: list[Import] = []
        self._functions = 0
        self._type_checking = 0

    def _how(self) -> str:
        if self._type_checking:
            return "under TYPE_CHECKING"
        return "inside a function" if self._functions else "at module level"

    def _add(self, names: list[str], node: ast.AST, how: str | None = None) -> None:
        """Record the project modules ``names`` resolve to (other packages are not ours)."""
        line = getattr(node, "lineno", 0)
        targets = {_resolve(name, self.modules) for name in names} - {None, self.module}
        for target in sorted(t for t in targets if t is not None):
            self.found.append(Import(self.module, target, self.path, line, how or self._how()))

    def _absolute(self, name: str | None, level: int) -> str:
        if not level:
            return name or ""
        base = self.module.split(".")
        base = base if self.is_package else base[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, name] if name else base)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.visit(node.test)
        self._type_checking += 1
        for child in node.body:
            self.visit(child)
        self._type_checking -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self._add([alias.name for alias in node.names], node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # ``from actors.jobs import actor`` imports the module ``actors.jobs.actor``;
        # ``from actors.jobs.actor import Jobs`` the module ``actors.jobs.actor``.
        base = self._absolute(node.module, node.level)
        self._add([f"{base}.{alias.name}" for alias in node.names], node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0] if node.args else None
        if (
            name in ("import_module", "__import__")
            and isinstance(first, ast.Constant)
            and isinstance(first.value, str)
        ):
            target = first.value
            if target.startswith("."):
                package = next((k.value for k in node.keywords if k.arg == "package"), None)
                dots = len(target) - len(target.lstrip("."))
                if isinstance(package, ast.Constant) and isinstance(package.value, str):
                    parts = package.value.split(".")
                    parts = parts[: len(parts) - (dots - 1)]
                    target = ".".join([*parts, target[dots:]] if target[dots:] else parts)
            self._add([target], node, "by string")
        self.generic_visit(node)


def find_imports(root: Path) -> tuple[set[str], list[Import]]:
    """Every module of the packages under ``root``, and every import they make."""
    paths = {
        _module_name(root, path): path
        for package in PACKAGE_DEPS
        for path in sorted((root / package).rglob("*.py"))
    }
    modules = set(paths)
    imports: list[Import] = []
    for module, path in sorted(paths.items()):
        finder = _Finder(modules, module, path)
        finder.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        imports += finder.found
    return modules, imports


def _resolve(target: str, modules: set[str]) -> str | None:
    """The project module ``target`` names (its longest prefix that is one), or None."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return None


def _actors_unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "actors" and len(parts) > 1 else None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def import_violations(root: Path) -> list[str]:
    """Every import under ``root`` that breaks the layering, and every import cycle."""
    _, imports = find_imports(root)
    layer = {unit: i for i, units in enumerate(ACTORS_LAYERS) for unit in units}
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for imp in imports:
        target = imp.target
        if imp.how != "under TYPE_CHECKING":
            edges.setdefault(imp.source, set()).add(target)
        source_pkg, target_pkg = imp.source.split(".")[0], target.split(".")[0]
        if source_pkg != target_pkg and target_pkg not in PACKAGE_DEPS[source_pkg]:
            problems.append(f"{imp.where(root)} ({imp.how}): {source_pkg} may not import it")
            continue
        source_unit, target_unit = _actors_unit(imp.source), _actors_unit(target)
        if source_unit is None or target_unit is None or source_unit == target_unit:
            continue
        if source_unit not in layer or target_unit not in layer:
            unknown = source_unit if source_unit not in layer else target_unit
            problems.append(f"{imp.where(root)}: actors.{unknown} is not in ACTORS_LAYERS")
        elif layer[target_unit] >= layer[source_unit]:
            problems.append(
                f"{imp.where(root)} ({imp.how}): actors.{source_unit} (layer "
                f"{layer[source_unit] + 1}) may not import actors.{target_unit} (layer "
                f"{layer[target_unit] + 1})"
            )
    problems += [f"import cycle: {' <-> '.join(c)}" for c in _cycles(edges)]
    return sorted(set(problems))


@pytest.mark.parametrize("name", list(PACKAGE_DEPS))
def test_package_imports(name: str) -> None:
    assert importlib.import_module(name).__name__ == name


def test_every_actors_unit_has_a_layer() -> None:
    units = {p.stem for p in (ROOT / "actors").iterdir() if p.suffix == ".py" or p.is_dir()}
    units -= {"__init__", "__pycache__"}
    assert units == {unit for layer in ACTORS_LAYERS for unit in layer}


def test_the_project_follows_the_layering_and_has_no_import_cycle() -> None:
    assert import_violations(ROOT) == []


def test_package_inits_import_nothing_and_list_real_submodules() -> None:
    """An ``__init__`` states what its package offers and imports nothing (start-up stays lazy);
    its ``__all__``, when it has one, names public submodules that exist."""
    problems = []
    for init in sorted(
        p for package in PACKAGE_DEPS for p in (ROOT / package).rglob("__init__.py")
    ):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        name = init.parent.relative_to(ROOT)
        if not ast.get_docstring(tree):
            problems.append(f"{name}: no docstring")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and not (
                isinstance(node, ast.ImportFrom) and node.module == "__future__"
            ):
                problems.append(f"{name}: imports at line {node.lineno}")
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                listed = ast.literal_eval(node.value)
                problems += [
                    f"{name}: __all__ names {sub!r}, which is not a submodule"
                    for sub in listed
                    if not (init.parent / f"{sub}.py").is_file()
                    and not (init.parent / sub / "__init__.py").is_file()
                ]
    assert problems == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_reports_each_kind_of_violation(tmp_path: Path) -> None:
    inits = [f"{p}/__init__.py" for p in PACKAGE_DEPS] + [
        "actors/jobs/__init__.py",
        "actors/board/__init__.py",
        "actors/cli/__init__.py",
    ]
    _write(tmp_path, dict.fromkeys(inits, ""))
    _write(
        tmp_path,
        {
            "actors/jobs/actor.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from actors.cli.main import Thing\n"
            ),
            "actors/board/state.py": "def f():\n    from actors.cli import main\n",
            "actors/cli/main.py": "import actors.board.state\nimport actors.jobs.actor\n",
            "harness/x.py": (
                "import importlib\n"
                "import actors\n"
                "def f():\n"
                "    from actors.jobs import actor\n"
                "def g():\n"
                "    return importlib.import_module('actors.jobs.actor')\n"
                "def h():\n"
                "    return __import__('mailboxes')\n"
                "def i():\n"
                "    return importlib.import_module('.jobs', package='actors')\n"
            ),
            "teamctl_base/y.py": "import harness.x\n",
            "mailboxes/a.py": "def f():\n    from mailboxes import b\n",
            "mailboxes/b.py": "from . import a\n",
            "mailboxes/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mailboxes import d\n"
            ),
            "mailboxes/d.py": "import mailboxes.c\n",
        },
    )
    assert import_violations(tmp_path) == sorted(
        [
            "actors/board/state.py:2: actors.board.state imports actors.cli.main (inside a "
            "function): actors.board (layer 2) may not import actors.cli (layer 9)",
            "harness/x.py:2: harness.x imports actors (at module level): harness may not import it",
            "harness/x.py:4: harness.x imports actors.jobs.actor (inside a function): harness may "
            "not import it",
            "harness/x.py:6: harness.x imports actors.jobs.actor (by string): harness may not "
            "import it",
            "harness/x.py:8: harness.x imports mailboxes (by string): harness may not import it",
            "harness/x.py:10: harness.x imports actors.jobs (by string): harness may not import it",
            "actors/jobs/actor.py:3: actors.jobs.actor imports actors.cli.main (under "
            "TYPE_CHECKING): actors.jobs (layer 3) may not import actors.cli (layer 9)",
            "teamctl_base/y.py:1: teamctl_base.y imports harness.x (at module level): "
            "teamctl_base may not import it",
            # The cycle through a function-level import is found; the one closed only under
            # TYPE_CHECKING (mailboxes.c <-> mailboxes.d) is not a cycle at run time.
            "import cycle: actors.board.state <-> actors.cli.main",
            "import cycle: mailboxes.a <-> mailboxes.b",
        ]
    )
