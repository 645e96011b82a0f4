"""Which transcript lines are fsynced (``harness/transcript.py``): a model's answer before the call
returns, together with every input line before it; the input side alone is not (the next answer's
fsync or ``close`` makes it durable). Mail is acked only after the answer that read it is in the
transcript (``actors/runtime/agent_actor.py``), so that answer's fsync covers the mail too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock
from harness.transcript import Transcript, load_transcript


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fsync made, as the size of the file synced at that moment."""
    made: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        made.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return made


def test_the_input_side_waits_for_the_next_answers_fsync(tmp_path: Path, fsyncs: list[int]) -> None:
    path = tmp_path / "w1.jsonl"
    t = Transcript(path)
    t.meta(agent="w1", session_id="s")
    t.message(Message(role="user", content=(TextBlock(text="You now hold task_1"),)))
    assert fsyncs == []  # written (flushed), not yet synced
    assert len(load_transcript(path).messages) == 1  # a reader in this process sees it
    t.message(
        Message(
            role="assistant", content=(ToolUseBlock(id="toolu_1", name="write_file", input={}),)
        )
    )
    assert fsyncs == [path.stat().st_size]  # one fsync, covering the input before the answer
    t.amend([TextBlock(text="a message that came meanwhile")])
    t.message(Message(role="user", content=(ToolResultBlock(tool_use_id="toolu_1", content="ok"),)))
    assert len(fsyncs) == 1
    t.close()  # a clean close leaves every line durable
    assert fsyncs == [fsyncs[0], path.stat().st_size]
    assert [m.role for m in load_transcript(path).messages] == ["user", "assistant", "user"]


def test_a_transcript_ending_on_an_answer_closes_without_another_fsync(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    t = Transcript(tmp_path / "lead.jsonl")
    t.message(Message(role="user", content=(TextBlock(text="hi"),)))
    t.message(Message(role="assistant", content=(TextBlock(text="hello"),)))
    t.close()
    assert len(fsyncs) == 1


def test_without_fsync_nothing_is_synced(tmp_path: Path, fsyncs: list[int]) -> None:
    t = Transcript(tmp_path / "bench.jsonl", fsync=False)
    t.message(Message(role="user", content=(TextBlock(text="hi"),)))
    t.message(Message(role="assistant", content=(TextBlock(text="hello"),)))
    t.close()
    assert fsyncs == []
