"""Loading workflow files: one clear error naming the file (and line) for each bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.workflows.loader import (
    WorkflowError,
    find_workflow,
    list_workflows,
    load_workflow,
)

GOOD = 'META = {"name": "good", "description": "d", "phases": ["a"]}\nasync def run(ctx, args):\n    return 1\n'


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_loads_with_its_meta_and_hash(tmp_path: Path) -> None:
    wf = load_workflow(_write(tmp_path, "good", GOOD))
    assert (wf.name, wf.description, wf.phases) == ("good", "d", ("a",))
    assert len(wf.sha256) == 64


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("META = {'name': 'bad'\n", r"bad\.py:1: the workflow does not import: SyntaxError"),
        ("x = 1\nraise RuntimeError('boom')\n", r"bad\.py:2: the workflow does not import: .*boom"),
        ("async def run(ctx, args):\n    pass\n", "needs META"),
        ("META = {'name': 'bad'}\n", r"needs `async def run\(ctx, args\)`"),
        ("META = {'name': 'bad'}\ndef run(ctx, args):\n    pass\n", "needs `async def run"),
        ("META = {'name': '../x'}\nasync def run(c, a):\n    pass\n", "unsafe workflow name"),
        ("META = {'name': 'other'}\nasync def run(c, a):\n    pass\n", "but the file is bad.py"),
    ],
)
def test_a_bad_file_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(WorkflowError, match=message):
        load_workflow(_write(tmp_path, "bad", text))


def test_project_workflows_come_first_and_examples_ship(tmp_path: Path) -> None:
    folder = tmp_path / ".team" / "workflows"
    _write(folder, "good", GOOD)
    _write(folder, "bad", "oops(")
    assert find_workflow(tmp_path, "good") == folder / "good.py"
    assert find_workflow(tmp_path, "review_changes").parent.name == "examples"
    found = list_workflows(tmp_path)
    names = [getattr(w, "name", None) for w in found]
    assert "good" in names and "review_changes" in names
    assert any(isinstance(w, WorkflowError) and "bad.py" in str(w) for w in found)
    with pytest.raises(WorkflowError, match="unsafe workflow name"):
        find_workflow(tmp_path, "../etc")
    with pytest.raises(WorkflowError, match="no workflow named 'missing'"):
        find_workflow(tmp_path, "missing")
