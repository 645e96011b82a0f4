"""Approvals a person gives (issue 12 items 3 and 13): the real ``teamctl run`` in a
pseudo-terminal shows each request with its id and takes ``y`` / ``n`` / feedback typed there;
headless runs refuse at once what nobody can answer, or (``--approvals human``) wait and print
the command that answers; ``teamctl approve`` from another terminal answers the same request."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.e2e.team_support import TEAMCTL, teamctl, wait_journal, write_script

WRITE_SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^write the greeting",
                    "tool_uses": [
                        {
                            "name": "write_file",
                            "input": {"path": "hello.txt", "content": "hello\n"},
                        }
                    ],
                },
                {"match": "(?s).", "text": "Done with the file.", "priority": -1},
                {"match": "^$", "text": "Done with the file.", "priority": -2},
            ]
        }
    }
}


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for args in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "t@example.com"],
        ["git", "config", "user.name", "T"],
        ["git", "commit", "-q", "--allow-empty", "-m", "init"],
        [TEAMCTL, "init"],
    ):
        subprocess.run(args, cwd=root, check=True, capture_output=True)
    return root


def _env(script: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMCTL_"))}
    env["TEAMCTL_SCRIPT"] = str(script)
    env["COLUMNS"] = "200"
    env.pop("NO_COLOR", None)
    return env


class Terminal:
    """``teamctl ARGS`` on a pseudo-terminal (stdin, stdout and stderr), read by a thread."""

    def __init__(self, root: Path, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [TEAMCTL, *args],
            cwd=root,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self._buf = b""
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.master], [], [], 1.0)
            if not ready:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the other side closed
                return
            if not chunk:
                return
            with self._cond:
                self._buf += chunk
                self._cond.notify_all()

    @property
    def text(self) -> str:
        with self._cond:
            return self._buf.decode("utf-8", "replace")

    def expect(self, pattern: str, timeout: float = 60, *, after: int = 0) -> re.Match[str]:
        """Wait for ``pattern`` in the output so far (from character ``after``); its match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = rx.search(self._buf.decode("utf-8", "replace"), after)
                if found:
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"no {pattern!r} in:\n{self._buf.decode('utf-8', 'replace')}"
                self._cond.wait(left)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        """``/quit``, then wait for the exit (killed after a bound)."""
        try:
            if self.proc.poll() is None:
                self.type("/quit")
                self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            self._reader.join(5)
            os.close(self.master)
        return self.proc.returncode


def _decisions(root: Path) -> list[dict[str, Any]]:
    rows = []
    for line in (root / ".team" / "journal.jsonl").read_text().splitlines():
        if '"permission.decided"' in line:
            rows.append(json.loads(line))
    return rows


def _ask_in_console(tmp_path: Path) -> tuple[Path, Terminal, str]:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", WRITE_SCRIPT)
    term = Terminal(root, ["run"], _env(script))
    term.expect("Type to talk to the lead")
    term.type("write the greeting")
    found = term.expect(r"\? (perm-[0-9a-f]+)  lead asks to use write_file on hello\.txt")
    term.expect("always = allow Edit for this session")
    return root, term, found.group(1)


def test_an_ask_of_the_lead_is_answered_y_in_the_console_and_the_file_is_written(
    tmp_path: Path,
) -> None:
    root, term, rid = _ask_in_console(tmp_path)
    try:
        assert not (root / "hello.txt").exists()  # it waits for the answer
        term.type("y")
        term.expect(f"allowed {rid}")
        term.expect(r"\[lead\] Done with the file\.")
        assert (root / "hello.txt").read_text() == "hello\n"
    finally:
        code = term.close()
    assert code == 0
    [decided] = [d for d in _decisions(root) if d["data"]["request_id"] == rid]
    assert decided["data"]["decision"] == "allow" and decided["data"]["by"] == "user"
    assert "\x1b]" not in term.text


def test_n_refuses_the_write_and_feedback_text_reaches_the_lead(tmp_path: Path) -> None:
    root, term, rid = _ask_in_console(tmp_path)
    try:
        term.type("n")
        term.expect(f"denied {rid}")
        term.expect(r"\[lead\] Done with the file\.")
        assert not (root / "hello.txt").exists()
        # A second ask, answered with text: a refusal carrying it, which the lead reads.
        mark = len(term.text)
        term.type("write the greeting")
        found = term.expect(r"\? (perm-[0-9a-f]+)  lead asks to use write_file", after=mark)
        second = found.group(1)
        term.type("use notes.md instead")
        term.expect(f"denied {second}: use notes.md instead")
        assert not (root / "hello.txt").exists()
    finally:
        term.close()
    by_id = {d["data"]["request_id"]: d["data"] for d in _decisions(root)}
    assert by_id[rid]["decision"] == "deny" and by_id[rid]["by"] == "user"
    assert by_id[second] == {
        "request_id": second,
        "decision": "deny",
        "by": "user",
        "reason": "use notes.md instead",
    }
    transcript = (root / ".team" / "transcripts" / "lead.jsonl").read_text()
    assert "denied by user: use notes.md instead" in transcript


def test_always_allows_later_writes_for_the_session(tmp_path: Path) -> None:
    root, term, rid = _ask_in_console(tmp_path)
    try:
        term.type("always")
        term.expect(f"allowed {rid} \\(and Edit for this session\\)")
        term.expect(r"\[lead\] Done with the file\.")
        (root / "hello.txt").unlink()
        mark = len(term.text)
        term.type("write the greeting")
        term.expect(r"\[lead\] Done with the file\.", after=mark)
        assert (root / "hello.txt").read_text() == "hello\n"
    finally:
        term.close()
    second = [d["data"] for d in _decisions(root) if d["data"]["request_id"] != rid]
    assert second[0]["decision"] == "allow"
    assert "allowed for this session by Edit" in second[0]["reason"]
    assert term.text.count("lead asks to use write_file") == 1  # not asked again


def test_teamctl_approve_from_another_terminal_answers_the_console_request(
    tmp_path: Path,
) -> None:
    root, term, rid = _ask_in_console(tmp_path)
    try:
        other = subprocess.run(
            [TEAMCTL, "approve", rid], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert other.returncode == 0, other.stderr
        term.expect(f"{rid} was answered elsewhere")
        term.expect(r"\[lead\] Done with the file\.")
        assert (root / "hello.txt").read_text() == "hello\n"
    finally:
        term.close()


# -- headless ------------------------------------------------------------------------------------


def test_headless_refuses_at_once_and_says_what_would_allow_it(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", WRITE_SCRIPT)
    proc = teamctl(root, "run", "--headless", "write the greeting", script=script)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert not (root / "hello.txt").exists()
    [line] = [x for x in err.splitlines() if "refused write_file" in x]
    assert "[lead] refused write_file on hello.txt (perm-" in line
    assert "--permission-mode acceptEdits" in line and '"Edit(hello.txt)"' in line
    assert "--approvals human" in line
    [decided] = _decisions(root)
    assert decided["data"]["decision"] == "deny" and decided["data"]["by"] == "runtime"
    transcript = (root / ".team" / "transcripts" / "lead.jsonl").read_text()
    assert "--permission-mode acceptEdits" in transcript  # the agent is told too


def test_headless_stream_json_reports_the_refusal_as_an_event(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", WRITE_SCRIPT)
    proc = teamctl(
        root,
        "run",
        "--headless",
        "--output-format",
        "stream-json",
        "write the greeting",
        script=script,
    )
    out, _err = proc.communicate(timeout=120)
    events = [json.loads(x) for x in out.splitlines() if x.strip()]
    [refused] = [e for e in events if e["type"] == "permission_refused"]
    assert refused["agent"] == "lead" and refused["tool"] == "write_file"
    assert "acceptEdits" in refused["hint"]
    assert events[-1]["type"] == "result"


def test_headless_approvals_human_waits_prints_the_command_and_takes_teamctl_approve(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path)
    script = write_script(tmp_path / "script.yaml", WRITE_SCRIPT)
    proc = teamctl(
        root, "run", "--headless", "--approvals", "human", "write the greeting", script=script
    )
    try:
        assert proc.stderr is not None
        line = ""
        for line in proc.stderr:
            if "[approval]" in line:
                break
        found = re.search(r"\[approval\] (perm-[0-9a-f]+): lead asks to use write_file", line)
        assert found, line
        rid = found.group(1)
        assert f"`teamctl approve {rid}`" in line
        assert f'`teamctl reject {rid} --feedback "..."`' in line
        status = subprocess.run(
            [TEAMCTL, "status"], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert rid in status.stdout and "write_file hello.txt" in status.stdout
        approved = subprocess.run(
            [TEAMCTL, "approve", rid], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert approved.returncode == 0, approved.stderr
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert (root / "hello.txt").read_text() == "hello\n"
    assert "[lead] Done with the file." in out


PLAN_SCRIPT: dict[str, Any] = {
    "agents": {
        "lead": {
            "rules": [
                {
                    "match": "^refactor",
                    "tool_uses": [
                        {
                            "name": "create_task",
                            "input": {"subject": "refactor the parser", "plan_required": True},
                        },
                        {"name": "spawn_teammate", "input": {"name": "w1", "prompt": "Work."}},
                    ],
                },
                {"match": "(?s).", "text": "Noted.", "priority": -1},
                {"match": "^$", "text": "Noted.", "priority": -2},
            ]
        },
        "w1": {
            "rules": [
                {
                    "match": "You now hold task task_1",
                    "tool_uses": [{"name": "submit_plan", "input": {"plan": "v1 plan"}}],
                },
                {
                    "match": "(?s)was rejected.*Feedback: add tests",
                    "tool_uses": [{"name": "submit_plan", "input": {"plan": "v2 plan with tests"}}],
                },
                {
                    "match": "was approved",
                    "tool_uses": [
                        {"name": "write_file", "input": {"path": "done.txt", "content": "ok"}},
                        {
                            "name": "complete_task",
                            "input": {"task_id": "task_1", "summary": "refactored"},
                        },
                    ],
                },
                {"match": "(?s).", "text": "OK.", "priority": -1},
                {"match": "^$", "text": "OK.", "priority": -2},
            ]
        },
    }
}


def test_a_plan_for_a_human_reviewer_is_rejected_with_feedback_then_approved_in_the_console(
    tmp_path: Path,
) -> None:
    root = _repo(tmp_path)
    settings = root / ".team" / "settings.json"
    data = json.loads(settings.read_text())
    data["approvals"]["plans"] = "human"
    settings.write_text(json.dumps(data))
    script = write_script(tmp_path / "script.yaml", PLAN_SCRIPT)
    term = Terminal(root, ["run", "--permission-mode", "acceptEdits"], _env(script))
    try:
        term.expect("Type to talk to the lead")
        term.type("refactor the parser")
        first = term.expect(r"\? (plan-task_1-\S+)  w1 submitted a plan for task_1:\s+v1 plan")
        term.type("add tests")
        term.expect(f"rejected plan {first.group(1)}: add tests")
        mark = len(term.text)
        second = term.expect(r"\? (plan-task_1-\S+)  w1 submitted a plan", after=mark)
        term.expect("v2 plan with tests", after=mark)
        term.type("y")
        term.expect(f"approved plan {second.group(1)}")
        assert wait_journal(root, lambda evs: any(e.type == "task.completed" for e in evs), 60)
    finally:
        term.close()
    assert (root / "done.txt").read_text() == "ok"
    lines = (root / ".team" / "journal.jsonl").read_text().splitlines()
    reviews = [json.loads(x)["data"] for x in lines if '"plan.reviewed"' in x]
    assert [(r["approve"], r["feedback"], r["reviewer"]) for r in reviews] == [
        (False, "add tests", "user"),
        (True, "", "user"),
    ]


def test_headless_announces_a_plan_for_a_human_reviewer_with_the_commands(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    settings = root / ".team" / "settings.json"
    data = json.loads(settings.read_text())
    data["approvals"]["plans"] = "human"
    settings.write_text(json.dumps(data))
    script = write_script(tmp_path / "script.yaml", PLAN_SCRIPT)
    proc = teamctl(root, "run", "--headless", "refactor the parser", script=script)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err  # idle with task_1 unfinished: the plan waits for a person
    found = re.search(r"\[approval\] (plan-task_1-\S+): w1 submitted a plan for task_1", err)
    assert found, err
    assert f"`teamctl approve {found.group(1)}`" in err
    status = subprocess.run([TEAMCTL, "status"], cwd=root, capture_output=True, text=True)
    assert found.group(1) in status.stdout and "plan for task_1" in status.stdout
