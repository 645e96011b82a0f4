"""``teamctl task add``, ``task claim`` and ``send`` import no pydantic: the payloads and envelopes
they make are ``teamctl_base.records.Record``s (docs/ARCHITECTURE.md, "Start-up and benchmarks").
A bad value is still refused with pydantic's own message (its model decides what a record
cannot)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = [sys.executable, "-c", "from actors.cli.main import main; main()"]


def _run(argv: list[str], cwd: Path) -> tuple[str, list[str]]:
    """The output of one CLI command run in a fresh interpreter, and the pydantic packages it
    imported."""
    code = (
        "import contextlib, io, sys\n"
        "from actors.cli.main import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        cli({argv!r})\n"
        "    except SystemExit as done:\n"
        "        assert not done.code, done.code\n"
        "print(repr(out.getvalue()))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_core'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    output, imported = done.stdout.strip().splitlines()[-2:]
    return ast.literal_eval(output), ast.literal_eval(imported)


def test_task_add_task_claim_and_send_import_no_pydantic(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*SCRIPT, "init"], cwd=tmp_path, check=True, capture_output=True)
    for argv, shown in (
        (["task", "add", "first"], "added task_1: first"),
        (["task", "add", "second", "--blocked-by", "task_1"], "added task_2: second"),
        (["task", "claim", "task_1", "--as", "ann"], "ann claimed task_1"),
        (["send", "ann", "hello"], "to ann"),
        (["send", "*", "everyone"], "to lead"),
    ):
        output, imported = _run(argv, tmp_path)
        assert shown in output, argv
        assert imported == [], argv
    # what they stored reads back as the payloads and messages they meant
    journal = tmp_path / ".team" / "journal.jsonl"
    events = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    assert [e["type"] for e in events[1:]] == [
        "task.created",
        "task.created",
        "member.spawned",
        "task.claimed",
    ]
    assert events[2]["data"]["blocked_by"] == ["task_1"]
    assert events[4]["data"] == {"task_id": "task_1", "owner": "ann", "epoch": 1, "human": True}
    inbox = subprocess.run(
        [*SCRIPT, "inbox", "ann", "--json"], cwd=tmp_path, check=True, capture_output=True
    )
    assert [m["body"]["text"] for m in json.loads(inbox.stdout)] == ["hello", "everyone"]


def test_a_bad_recipient_is_refused_with_pydantic_s_message(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*SCRIPT, "init"], cwd=tmp_path, check=True, capture_output=True)
    done = subprocess.run(
        [*SCRIPT, "send", "a/b", "hi"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: invalid MessageDraft: to: String should match pattern "
        "'^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\\*)$'"
    )
