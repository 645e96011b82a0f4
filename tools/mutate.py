"""A small mutation tester: which single-operator changes of a module do its tests not notice?

    python tools/mutate.py actors/board/rules.py -- tests/actors/board -x -q
    python tools/mutate.py harness/permissions/rules.py --list

Each mutant changes one thing in the module (a comparison, ``and``/``or``, a ``not``, an
arithmetic operator, a constant: a boolean, a number, a string that is not a docstring) and runs
the given pytest arguments against it in a scratch copy of the repository (the working tree is
never touched, so other test runs are not disturbed). A mutant is *killed* when pytest fails,
*survives* when it passes. ``--json FILE`` writes every mutant and its fate; the summary prints
the kill rate and each survivor (line and change) to judge: a survivor that changes what a user
could see needs a test, an equivalent one (same behaviour by construction) does not.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
NO_SWAP = 99
"""Exit status of a forked child that could not swap the mutated code in (pytest uses 0-5)."""
SKIP_DIRS = {".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

_SWAP: dict[type[ast.AST], type[ast.AST]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.And: ast.Or,
    ast.Or: ast.And,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_SYMBOL = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.And: "and",
    ast.Or: "or",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
    ast.Div: "/",
    ast.Mod: "%",
}


@dataclass(frozen=True)
class Mutant:
    index: int
    line: int
    change: str
    fate: str = ""
    in_body: bool = False
    """Inside a function body: ``--fork`` can swap the function's code in a running process."""
    """``killed``, ``survived``, ``timeout`` (counted as killed) or empty (not run)."""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (and bare string statements, e.g. attribute docs)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    found.add(id(stmt.value))
    return found


def _skipped(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: docstrings, ``__all__``, annotations, f-string pieces."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            skip.update(id(n) for n in ast.walk(node))
        for ann in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if isinstance(ann, ast.AST):
                skip.update(id(n) for n in ast.walk(ann))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values if isinstance(v, ast.Constant))
    return skip


def _in_bodies(tree: ast.AST) -> set[int]:
    """ids of the nodes inside a function's body (not its decorators, defaults or signature)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for stmt in node.body:
                found.update(id(n) for n in ast.walk(stmt))
    return found


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, int, str]]:
    """(node, alternative, description) of each possible mutation, in a stable order."""
    skip = _skipped(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _SWAP:
                    new = _SWAP[type(op)]
                    yield node, i, f"L{line}: {_SYMBOL[type(op)]} -> {_SYMBOL[new]}"
        elif isinstance(node, ast.BoolOp | ast.BinOp):
            kind = type(node.op)
            if kind in _SWAP:
                yield node, 0, f"L{line}: {_SYMBOL[kind]} -> {_SYMBOL[_SWAP[kind]]}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, 0, f"L{line}: drop `not`"
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                yield node, 0, f"L{line}: {value} -> {not value}"
            elif isinstance(value, int | float):
                yield node, 0, f"L{line}: {value!r} -> {value + 1!r}"
            elif isinstance(value, str) and value:
                yield node, 0, f"L{line}: {_short(value)!r} -> 'XX' + it"


def _short(text: str) -> str:
    return text if len(text) <= 30 else text[:27] + "..."


def _apply(node: ast.AST, alt: int) -> None:
    if isinstance(node, ast.Compare):
        node.ops[alt] = cast(ast.cmpop, _SWAP[type(node.ops[alt])]())
    elif isinstance(node, ast.BoolOp):
        node.op = cast(ast.boolop, _SWAP[type(node.op)]())
    elif isinstance(node, ast.BinOp):
        node.op = cast(ast.operator, _SWAP[type(node.op)]())
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            node.value = not value
        elif isinstance(value, int | float):
            node.value = value + 1
        else:
            node.value = "XX" + str(value)


class _DropNot(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        return node.operand if node is self.target else node


def mutants(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    bodies = _in_bodies(tree)
    return [
        Mutant(i, getattr(node, "lineno", 0), change, in_body=id(node) in bodies)
        for i, (node, _, change) in enumerate(_sites(tree))
    ]


def mutated(source: str, index: int) -> str:
    """The module's source with mutant ``index`` applied (reformatted by ``ast.unparse``)."""
    tree = ast.parse(source)
    for i, (node, alt, _) in enumerate(_sites(tree)):
        if i == index:
            if isinstance(node, ast.UnaryOp):
                tree = _DropNot(node).visit(tree)
            else:
                _apply(node, alt)
            return ast.unparse(ast.fix_missing_locations(tree))
    raise IndexError(index)


def _copy_tree(dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP_DIRS}

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def _pytest(tree: Path, args: list[str], timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    try:
        done = subprocess.run(
            cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def _functions(space: dict[str, Any]) -> dict[str, Any]:
    """Qualified name → plain function of the module-level functions and class members."""
    found: dict[str, Any] = {}

    def plain(value: Any) -> Any:
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        while hasattr(value, "__wrapped__"):
            value = value.__wrapped__
        return value if isinstance(value, types.FunctionType) else None

    def visit(prefix: str, names: dict[str, Any], owner: str) -> None:
        for name, value in names.items():
            if isinstance(value, property):
                for part, fn in (("get", value.fget), ("set", value.fset)):
                    if fn is not None:
                        found[f"{prefix}{name}.{part}"] = fn
            elif isinstance(value, type) and value.__module__ == owner:
                if f"{prefix}{name}." not in {k[: len(prefix) + len(name) + 1] for k in found}:
                    visit(f"{prefix}{name}.", dict(vars(value)), owner)
            elif (fn := plain(value)) is not None and fn.__module__ == owner:
                found[prefix + name] = fn

    visit("", space, str(space["__name__"]))
    return found


def _load(module: str, source: str, path: Path) -> dict[str, Any]:
    space: dict[str, Any] = {"__name__": module, "__file__": str(path)}
    exec(compile(source, str(path), "exec"), space)
    return space


def _swap_code(module: str, path: Path, base: dict[str, Any], source: str) -> bool:
    """Give the loaded module's functions the code of ``source`` where it differs from
    ``base`` (same module, unmutated); False when a changed function cannot be swapped."""
    real = _functions(vars(sys.modules[module]))
    new = _functions(_load(module, source, path))
    changed = [n for n, fn in base.items() if n in new and fn.__code__ != new[n].__code__]
    if not changed or any(n not in real for n in changed):
        return False
    try:
        for name in changed:
            real[name].__code__ = new[name].__code__
    except ValueError:  # another closure shape
        return False
    return True


def _forked(run: Callable[[], int], timeout: float) -> str:
    pid = os.fork()
    if pid == 0:  # the child: quiet, run, report by exit status
        code = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = run()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return {0: "survived", NO_SWAP: "fallback"}.get(code, "killed")
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


def _run_forked(
    opts: argparse.Namespace, source: str, found: list[Mutant], chosen: list[int]
) -> list[Mutant]:
    """Each mutant in a forked child of one process that imported everything once: functions
    get the mutated code in place; a mutant outside a function body (a module-level constant,
    a decorator argument) or one whose code cannot be swapped runs in a scratch copy instead."""
    import pytest

    module = opts.module.removesuffix(".py").replace("/", ".")
    path = ROOT / opts.module
    sys.path.insert(0, str(ROOT))
    importlib.import_module(module)
    base = _functions(_load(module, ast.unparse(ast.parse(source)), path))
    args = ["-p", "no:cacheprovider", "-q", *opts.pytest_args]
    baseline = _forked(lambda: int(pytest.main(args)), opts.timeout)
    if baseline != "survived":
        raise SystemExit(f"error: the tests fail on the unmutated module ({baseline})")
    results: list[Mutant] = []
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        tree = Path(scratch) / "repo"
        _copy_tree(tree)
        for index in chosen:
            text = mutated(source, index)

            def run(text: str = text) -> int:
                if not _swap_code(module, path, base, text):
                    return NO_SWAP
                return int(pytest.main(args))

            fate = _forked(run, opts.timeout) if found[index].in_body else "fallback"
            if fate == "fallback":
                (tree / opts.module).write_text(text, encoding="utf-8")
                fate = _pytest(tree, opts.pytest_args, opts.timeout)
                (tree / opts.module).write_text(source, encoding="utf-8")
            results.append(replace(found[index], fate=fate))
            print("." if fate != "survived" else "S", end="", flush=True)
    return results


def _run_copies(
    opts: argparse.Namespace, source: str, found: list[Mutant], chosen: list[int]
) -> list[Mutant]:
    """Each mutant written into a scratch copy of the repository, pytest run there."""
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        tree = Path(scratch) / "repo"
        _copy_tree(tree)
        target = tree / opts.module
        target.write_text(ast.unparse(ast.parse(source)), encoding="utf-8")
        if _pytest(tree, opts.pytest_args, opts.timeout) != "survived":
            raise SystemExit("error: the tests fail on the unmutated module")
        results: list[Mutant] = []
        for index in chosen:
            target.write_text(mutated(source, index), encoding="utf-8")
            fate = _pytest(tree, opts.pytest_args, opts.timeout)
            results.append(replace(found[index], fate=fate))
            print("." if fate != "survived" else "S", end="", flush=True)
        target.write_text(source, encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="After --: the pytest arguments."
    )
    parser.add_argument("module", help="the module to mutate, relative to the repository root")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--only", help="comma-separated mutant indexes to run")
    parser.add_argument("--sample", type=int, default=1, help="run every Nth mutant only")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--json", type=Path, help="write every mutant and its fate here")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="import once, fork per mutant and swap the mutated function's code in (fast)",
    )
    args = sys.argv[1:] if argv is None else argv
    split = args.index("--") if "--" in args else len(args)
    opts = parser.parse_args(args[:split])
    opts.pytest_args = args[split + 1 :]
    source = (ROOT / opts.module).read_text(encoding="utf-8")
    found = mutants(source)
    if opts.list:
        for m in found:
            print(f"{m.index:4d} {m.change}")
        print(f"{len(found)} mutants")
        return 0
    if opts.only:
        chosen = [int(i) for i in opts.only.split(",")]
    else:
        chosen = [m.index for m in found][:: max(opts.sample, 1)]
    started = time.monotonic()
    run = _run_forked if opts.fork else _run_copies
    return _report(opts, run(opts, source, found, chosen), started)


def _report(opts: argparse.Namespace, results: list[Mutant], started: float) -> int:
    killed = sum(r.fate != "survived" for r in results)
    print(f"\n{opts.module}: {killed}/{len(results)} killed", end="")
    print(f" ({100 * killed / max(len(results), 1):.1f} %) in {time.monotonic() - started:.0f}s")
    for r in results:
        if r.fate == "survived":
            print(f"  survived {r.index:4d} {r.change}")
    if opts.json:
        opts.json.write_text(json.dumps([asdict(r) for r in results], indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
