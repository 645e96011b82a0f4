"""System prompt assembly, token accounting, spilling and the compaction pipeline."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.context.compaction import (
    CLEARED,
    SUMMARY_PREFIX,
    CompactionConfig,
    Compactor,
    choose_cut,
    micro_compact,
    rebuild,
)
from harness.context.prompt import (
    REMINDER_GUIDANCE,
    SystemPrompt,
    TokenCounter,
    check_pairing,
    estimate_tokens,
    is_reminder,
    spill_oversize,
)
from harness.errors import ModelError
from harness.ports import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from tests.harness.loop_support import FakeModel, make_loop, reply


def user(text: str) -> Message:
    return Message(role="user", content=(TextBlock(text=text),))


def exchange(n: int, size: int = 100) -> list[Message]:
    """``n`` tool round trips after a first user message."""
    out = [user("goal: refactor the parser")]
    for i in range(n):
        out.append(Message(role="assistant", content=(ToolUseBlock(id=f"t{i}", name="read"),)))
        out.append(
            Message(
                role="user", content=(ToolResultBlock(tool_use_id=f"t{i}", content="r" * size),)
            )
        )
    return out


def test_system_prompt_is_one_cached_block_rendered_once() -> None:
    calls: list[str] = []
    prompt = SystemPrompt(identity="I am lead.", tool_guidance="Prefer edit_file.")
    prompt.add_static("Rules", "be nice")
    prompt.add_section("Skills", lambda: calls.append("skills") or "- release")
    prompt.add_section("Empty", lambda: "  ")
    prompt.add_volatile("Team", lambda: "alice: idle")
    (block,) = prompt.blocks()
    assert block.cache
    assert block.text == (
        "I am lead.\n\nPrefer edit_file.\n\n# Rules\nbe nice\n\n"
        f"# Context updates\n{REMINDER_GUIDANCE}\n\n# Skills\n- release"
    )
    assert prompt.blocks() == (block,) and calls == ["skills"]  # session sections: read once
    prompt.add_section("MCP servers", lambda: "- docs")  # added later: rendered again
    assert prompt.blocks()[0].text.endswith("# Skills\n- release\n\n# MCP servers\n- docs")


def test_reminders_carry_only_the_volatile_sections_that_changed() -> None:
    team, memory = ["alice: idle"], [""]
    prompt = SystemPrompt(identity="I am lead.")
    prompt.add_volatile("Team", lambda: team[0])
    prompt.add_volatile("Memory", lambda: memory[0])
    first = prompt.reminder()
    assert first is not None and is_reminder(first)
    assert first.endswith("# Team\nalice: idle\n</system-reminder>") and "Memory" not in first
    assert prompt.reminder() is None  # nothing changed: no repeated reminder
    memory[0] = "- db.md: DB"
    assert prompt.reminder() == ("<system-reminder>\n# Memory\n- db.md: DB\n</system-reminder>")
    team[0], memory[0] = "alice: working", ""
    again = prompt.reminder()
    assert again is not None and "# Team\nalice: working" in again and "# Memory\n(none)" in again
    prompt.forget_reminders()  # e.g. after a compaction: everything again
    assert "# Team\nalice: working" in (prompt.reminder() or "")
    # never in the system prompt, which says once how to read reminders
    assert prompt.blocks()[0].text == f"I am lead.\n\n# Context updates\n{REMINDER_GUIDANCE}"


def test_turn_only_sections_wait_for_the_next_turn_unless_a_compaction_dropped_them() -> None:
    team, cwd = ["alice: idle"], ["/repo"]
    prompt = SystemPrompt(identity="I am lead.")
    prompt.add_volatile("Working directory", lambda: cwd[0], known="/repo")
    prompt.add_volatile("Team", lambda: team[0], mid_turn=False)
    assert prompt.reminder() is not None  # the opening message: the team
    team[0], cwd[0] = "alice: working", "/repo/.team/worktrees/t1"
    mid = prompt.reminder(mid_turn=True)  # after tool results: only what must not wait
    assert (
        mid
        == "<system-reminder>\n# Working directory\n/repo/.team/worktrees/t1\n</system-reminder>"
    )
    assert prompt.reminder(mid_turn=True) is None
    assert prompt.reminder() == "<system-reminder>\n# Team\nalice: working\n</system-reminder>"
    team[0] = "alice: idle"
    prompt.forget_reminders()  # a compaction mid-turn: everything, at once
    both = prompt.reminder(mid_turn=True) or ""
    assert "# Team\nalice: idle" in both and "# Working directory" in both


def test_token_counter_uses_last_usage_plus_estimate() -> None:
    msgs = exchange(2)
    counter = TokenCounter(system_tokens=50)
    assert counter.count(msgs) == 50 + estimate_tokens(msgs)
    counter.record(Usage(input_tokens=1000, output_tokens=20, cache_read_input_tokens=500), 4)
    assert counter.count(msgs) == 1520 + estimate_tokens(msgs[4:])
    counter.reset()
    assert counter.count(msgs) == 50 + estimate_tokens(msgs)


def test_spill_keeps_small_results_and_previews_big_ones(tmp_path: Path) -> None:
    big = "HEAD" + "x" * 10_000 + "TAIL"
    small = ToolResultBlock(tool_use_id="a", content="ok")
    out = spill_oversize(
        [small, ToolResultBlock(tool_use_id="b", content=big)],
        limit_chars=1000,
        outputs_dir=tmp_path,
    )
    assert out[0] == small
    assert out[1].content.startswith("HEAD") and out[1].content.endswith("TAIL")
    assert len(out[1].content) < 1200
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].read_text() == big and str(files[0]) in out[1].content


def test_micro_compaction_keeps_the_last_results() -> None:
    msgs = exchange(6)
    out = micro_compact(msgs, keep=2)
    assert out is not None
    results = [b for m in out for b in m.content if isinstance(b, ToolResultBlock)]
    assert [r.content == CLEARED for r in results] == [True] * 4 + [False] * 2
    assert micro_compact(out, keep=2) is None  # idempotent
    check_pairing(out)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    msgs = [user("start")]
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["tools", "text", "newturn"]))
        if kind == "tools":
            k = draw(st.integers(1, 3))
            ids = [f"u{i}_{j}" for j in range(k)]
            uses = tuple(ToolUseBlock(id=x, name="t") for x in ids)
            msgs.append(Message(role="assistant", content=(TextBlock(text="hmm"), *uses)))
            size = draw(st.integers(0, 3000))
            msgs.append(
                Message(
                    role="user",
                    content=tuple(ToolResultBlock(tool_use_id=x, content="z" * size) for x in ids),
                )
            )
        else:
            msgs.append(Message(role="assistant", content=(TextBlock(text="answer"),)))
            msgs.append(user("next request"))
    return msgs


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(0, 5000))
def test_a_summary_cut_never_splits_a_pair(msgs: list[Message], keep: int) -> None:
    check_pairing(msgs)
    cut = choose_cut(msgs, keep)
    if cut is None:
        return
    assert 1 <= cut < len(msgs)
    new = rebuild("the summary", msgs[cut:])
    check_pairing(new)
    first = new[0].content[0]
    assert isinstance(first, TextBlock) and first.text.startswith(SUMMARY_PREFIX)
    assert new[-1].content[-len(msgs[-1].content) :] == msgs[-1].content


def test_below_the_threshold_nothing_happens() -> None:
    compactor = Compactor(FakeModel([]), model_name="m", agent="a")
    assert compactor.before_call(exchange(3), TokenCounter()) is None


def test_micro_then_summary_near_the_window() -> None:
    cfg = CompactionConfig(context_window=2000, keep_tool_results=1, keep_recent_ratio=0.1)
    msgs = exchange(10, size=1000)  # ~2,500 tokens of results
    compactor = Compactor(FakeModel([]), model_name="m", agent="a", config=cfg)
    micro = compactor.before_call(msgs, TokenCounter())
    assert micro is not None and micro.trigger == "micro"  # enough after clearing
    model = FakeModel([reply("SUMMARY: goal refactor; files parser.py")])
    compactor = Compactor(
        model, model_name="m", agent="a", config=cfg.model_copy(update={"summary_ratio": 0.01})
    )
    done = compactor.before_call(msgs, TokenCounter())
    assert done is not None and done.trigger == "auto"
    check_pairing(done.messages)
    assert "SUMMARY: goal refactor" in done.messages[0].content[0].text  # type: ignore[union-attr]
    sent = model.requests[0].messages[0].content[0]
    assert isinstance(sent, TextBlock) and "goal: refactor the parser" in sent.text


def test_circuit_breaker_after_three_failures() -> None:
    cfg = CompactionConfig(context_window=100, micro_ratio=0.1, summary_ratio=0.1)
    model = FakeModel([ModelError("down"), reply(""), ModelError("down")])
    compactor = Compactor(model, model_name="m", agent="a", config=cfg)
    msgs = exchange(4, size=400)
    for _ in range(3):
        result = compactor.before_call(msgs, TokenCounter())
        assert result is None or result.trigger == "micro"
        msgs = list(result.messages) if result else msgs
    assert compactor.breaker_open and len(model.requests) == 3
    # open breaker: no further summary calls (FakeModel would fail loudly if called)
    assert compactor.summarise(msgs, "auto", 10_000) is None
    assert compactor.summarise(msgs, "reactive", 10_000) is None


def test_pre_compact_hook_adds_instructions() -> None:
    model = FakeModel([reply("s")])
    triggers: list[str] = []

    def hook(trigger: str) -> str:
        triggers.append(trigger)
        return "keep the list of failing tests"

    compactor = Compactor(model, model_name="m", agent="a", pre_compact=hook)  # type: ignore[arg-type]
    assert compactor.summarise(exchange(3), "manual", 0, extra="focus on parser") is not None
    assert triggers == ["manual"]
    text = model.requests[0].messages[0].content[1]
    assert isinstance(text, TextBlock)
    assert "keep the list of failing tests" in text.text and "focus on parser" in text.text


def test_manual_compaction_through_the_loop_records_a_boundary(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("", ("echo", {"text": "a"})),
            reply("", ("echo", {"text": "b"})),
            reply("summary!"),
            reply("ok"),
        ]
    )
    loop = make_loop(tmp_path, model)
    loop.begin_turn("go")
    loop.step()
    loop.step()
    loop.request_compaction("keep it short")
    step = loop.step()
    assert step.compacted == ("manual",)
    check_pairing(loop.messages)
    lines = (tmp_path / "transcripts" / "tester.jsonl").read_text().splitlines()
    assert any(
        '"type":"compact_boundary"' in line and '"trigger":"manual"' in line for line in lines
    )
