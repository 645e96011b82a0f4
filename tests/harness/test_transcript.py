"""Transcripts: append, fold, byte-identical resume, torn tails, dangling tool_use repair."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.context.compaction import CompactionConfig
from harness.context.prompt import check_pairing
from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from harness.transcript import (
    OUTCOME_UNKNOWN,
    Transcript,
    TranscriptError,
    dangling_calls,
    load_transcript,
    repair_dangling,
)
from tests.harness.loop_support import FakeModel, canonical, make_loop, reply


def transcript_path(root: Path) -> Path:
    return root / "transcripts" / "tester.jsonl"


def resumed_request(root: Path, **kw: object) -> str:
    loaded = load_transcript(transcript_path(root))
    loop = make_loop(root, FakeModel([]), messages=loaded.messages, **kw)  # type: ignore[arg-type]
    return canonical(loop.build_request())


def test_resume_gives_a_byte_identical_next_request(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("reading", ("echo", {"text": 'ü ☃ "quoted"', "n": 1.5})),
            reply("done"),
            reply("", ("echo", {"text": "x"})),
        ]
    )
    loop = make_loop(tmp_path, model, max_turns=1)
    loop.run_turn("first task")
    loop.run_turn([TextBlock(text="second"), TextBlock(text="task")])
    loop.begin_turn("third")
    assert loop.step().transition == "tool_use"
    expected = canonical(loop.build_request())
    assert resumed_request(tmp_path, max_turns=1) == expected


def test_resume_after_amend_and_compaction_is_identical(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("", ("echo", {"text": "1"})),
            reply("", ("echo", {"text": "2"})),
            reply("the summary"),
            reply("", ("echo", {"text": "3"})),
        ]
    )
    loop = make_loop(tmp_path, model, max_turns=2)
    assert loop.run_turn("go").transition == "max_turns"
    loop.request_compaction()
    loop.begin_turn("more")  # merged into the tool-result message (an amend record)
    assert loop.step().compacted == ("manual",)
    expected = canonical(loop.build_request())
    loaded = load_transcript(transcript_path(tmp_path))
    assert loaded.boundaries == 1
    assert resumed_request(tmp_path, max_turns=2) == expected


def test_micro_compaction_is_recorded_too(tmp_path: Path) -> None:
    cfg = CompactionConfig(context_window=1000, keep_tool_results=1)
    # the reported usage drives the pipeline: ~780 of 1000 tokens is past micro, not summary
    used = Usage(input_tokens=620)
    model = FakeModel(
        [reply("", ("echo", {"text": "y" * 600}), usage=used) for _ in range(3)] + [reply("end")]
    )
    loop = make_loop(tmp_path, model, compaction=cfg)
    loop.run_turn("x")
    assert load_transcript(transcript_path(tmp_path)).boundaries >= 1
    assert load_transcript(transcript_path(tmp_path)).messages == loop.messages


def test_torn_last_line_is_dropped_and_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    t = Transcript(path)
    t.meta(agent="a", session_id="s1")
    first = Message(role="user", content=(TextBlock(text="hello"),))
    t.message(first)
    t.close()
    with path.open("a") as f:
        f.write('{"type":"message","message":{"role":"assis')
    loaded = load_transcript(path)
    assert loaded.torn_tail and loaded.messages == [first] and loaded.meta["session_id"] == "s1"
    again = Transcript(path)
    second = Message(role="assistant", content=(TextBlock(text="hi"),))
    again.message(second)
    again.close()
    loaded = load_transcript(path)
    assert not loaded.torn_tail and loaded.messages == [first, second]


def test_a_bad_middle_line_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    t = Transcript(path)
    t.message(Message(role="user", content=(TextBlock(text="hello"),)))
    t.close()
    with path.open("a") as f:
        f.write("garbage\n")
    t = Transcript(path)
    t.message(Message(role="assistant", content=(TextBlock(text="hi"),)))
    t.close()
    with pytest.raises(TranscriptError, match=r"a.jsonl:2"):
        load_transcript(path)


def test_missing_transcript_is_empty(tmp_path: Path) -> None:
    assert load_transcript(tmp_path / "none.jsonl").messages == []


def test_dangling_tool_use_is_repaired(tmp_path: Path) -> None:
    msgs = [
        Message(role="user", content=(TextBlock(text="go"),)),
        Message(
            role="assistant",
            content=(
                ToolUseBlock(id="r1", name="read_file", input={"path": "a"}),
                ToolUseBlock(id="w1", name="bash", input={"command": "make deploy"}),
            ),
        ),
    ]
    assert [c.id for c in dangling_calls(msgs)] == ["r1", "w1"]
    rerun_calls: list[str] = []

    def rerun(calls: list[ToolUseBlock]) -> list[ToolResultBlock]:
        rerun_calls.extend(c.id for c in calls)
        return [ToolResultBlock(tool_use_id=c.id, content="file body") for c in calls]

    fix = repair_dangling(msgs, is_read_only=lambda c: c.name == "read_file", rerun=rerun)
    assert fix is not None and rerun_calls == ["r1"]
    read, write = fix.content
    assert isinstance(read, ToolResultBlock) and read.content == "file body" and not read.is_error
    assert (
        isinstance(write, ToolResultBlock) and write.is_error and write.content == OUTCOME_UNKNOWN
    )
    check_pairing([*msgs, fix])
    assert repair_dangling([*msgs, fix], is_read_only=lambda c: True, rerun=rerun) is None
