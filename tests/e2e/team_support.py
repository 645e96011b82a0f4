"""Helpers for the end-to-end team tests: a scripted team driven through the real ``teamctl``
in subprocesses, waits on journal changes (no sleeps), and the nothing-lost oracle."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from actors.factory import open_team
from harness.model.fakeapi import FakeMessagesServer, RecordedRequest
from mailboxes.journal.frame import check_journal
from mailboxes.journal.store import FileJournal
from mailboxes.watch import FileWatcher

TEAMCTL = str(Path(sys.executable).parent / "teamctl")

BACKLOG_SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^Build the backlog",
                    "text": "Splitting the work.",
                    "tool_uses": [
                        {"name": "create_task", "input": {"subject": "one"}},
                        {"name": "create_task", "input": {"subject": "two"}},
                        {"name": "create_task", "input": {"subject": "three"}},
                        {
                            "name": "create_task",
                            "input": {"subject": "four", "blocked_by": ["task_1"]},
                        },
                        {
                            "name": "create_task",
                            "input": {"subject": "five", "blocked_by": ["task_2", "task_3"]},
                        },
                        {
                            "name": "create_task",
                            "input": {"subject": "six", "blocked_by": ["task_4", "task_5"]},
                        },
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                        {"name": "spawn_teammate", "input": {"name": "w2", "prompt": "Work."}},
                        {"name": "spawn_teammate", "input": {"name": "w3", "prompt": "Work."}},
                    ],
                },
                {"match": "Created task_", "text": "Team started."},
                {"match": "(?s).", "text": "Noted.", "priority": -1},
                {"match": "^$", "text": "Noted.", "priority": -2},
            ]
        },
        "*": {
            "rules": [
                {
                    "match": r"You now hold task (?P<id>task_\d+) \(claim",
                    "latency_ms": 120,
                    "tool_uses": [
                        {
                            "name": "complete_task",
                            "input": {"task_id": "{id}", "summary": "did {id}"},
                        }
                    ],
                },
                {"match": r"Completed (?P<id>task_\d+)", "text": "Finished {id}."},
                {"match": "(?s).", "text": "OK.", "priority": -1},
                {"match": "^$", "text": "OK.", "priority": -2},
            ]
        },
    }
}


def write_script(path: Path, script: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return path


def teamctl(
    root: Path,
    *args: str,
    script: Path | None = None,
    env_extra: dict[str, str] | None = None,
    **kw: Any,
) -> subprocess.Popen[str]:
    """Start ``teamctl ARGS`` in ``root`` (scripted model when ``script`` is given; ``env_extra``
    adds variables, e.g. those of ``model_env``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    if script is not None:
        env["TEAMCTL_SCRIPT"] = str(script)
    env.update(env_extra or {})
    return subprocess.Popen(
        [TEAMCTL, *args],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


@contextlib.contextmanager
def model_env(script: Path, *, via_api: bool) -> Iterator[ModelEnv]:
    """The environment that gives ``teamctl`` the scripted model of ``script``: in its own process
    (``TEAMCTL_SCRIPT``), or with ``via_api`` through the real ``anthropic`` SDK against the local
    fake Messages API serving ``script`` on loopback (per agent, by the ``x-teamctl-agent``
    header) for as long as the context lasts."""
    if not via_api:
        yield ModelEnv({"TEAMCTL_SCRIPT": str(script)}, None)
        return
    with FakeMessagesServer(script) as server:
        yield ModelEnv(
            {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "test-key"}, server
        )


@dataclass(frozen=True)
class ModelEnv:
    env: dict[str, str]
    server: FakeMessagesServer | None
    """The fake API (None for the in-process scripted model)."""


def wait_journal(root: Path, predicate: Callable[[list[Any]], bool], timeout: float) -> bool:
    """Wait (on journal change hints) until ``predicate(events)`` holds."""
    done = threading.Event()
    journal = FileJournal(root / ".team")

    def check(_paths: set[Path]) -> None:
        if predicate(list(journal.read_from(1))):
            done.set()

    watcher = FileWatcher([root / ".team" / "journal.jsonl"], check, rescan_s=0.5)
    try:
        watcher.start()
        check(set())
        return done.wait(timeout)
    finally:
        watcher.stop()
        journal.close()


def count(events: list[Any], type_: str) -> int:
    return sum(1 for e in events if e.type == type_)


def last_input(request: RecordedRequest) -> str:
    """The text of the newest user message of a request to the fake API (what the model is
    asked now): its text blocks and tool results."""
    message = request.body["messages"][-1]
    content = message["content"]
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(parts)


def oracle(root: Path) -> None:
    """Nothing lost: journal sound, no projection drift, each message in one place, each task in
    one state with at most one live owner, no process left in the repository."""
    report = check_journal(root / ".team" / "journal.jsonl")
    assert report.ok, report
    with open_team(root) as team:
        assert team.verify_projections() == []
        state = team.state()
        holders = [t.owner for t in state.tasks.values() if t.status == "in_progress"]
        assert len(holders) == len(set(holders))
        boxes = root / ".team" / "mailboxes"
        for box in boxes.iterdir():
            ids: list[str] = []
            for sub in ("new", "cur"):
                folder = box / sub
                if folder.is_dir():
                    ids += [name.rsplit(".", 1)[-1] for name in os.listdir(folder)]
            assert len(ids) == len(set(ids)), box
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        assert not cwd.startswith(str(root)), f"process {pid} still runs in the repository"
