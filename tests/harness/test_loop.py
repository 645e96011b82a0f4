"""The agent loop, driven by an in-test fake model and a fake executor."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.context.prompt import PairingError, check_pairing
from harness.errors import HarnessError, ModelError, PromptTooLong
from harness.loop import LoopHooks, PromptVerdict, StopVerdict
from harness.ports import Message, ModelRequest, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from tests.harness.loop_support import FakeExecutor, FakeModel, make_loop, reply


def test_tool_use_continues_then_text_completes(tmp_path: Path) -> None:
    model = FakeModel([reply("let me look", ("echo", {"text": "hi"})), reply("all done")])
    loop = make_loop(tmp_path, model)
    result = loop.run_turn("say hi")
    assert (result.transition, result.text, result.steps) == ("completed", "all done", 2)
    roles = [m.role for m in loop.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    tool_result = loop.messages[2].content[0]
    assert isinstance(tool_result, ToolResultBlock) and tool_result.content == "hi"
    # the second request carried the tool result
    assert model.requests[1].messages[-1] == loop.messages[2]
    assert result.usage == Usage(input_tokens=20, output_tokens=10)


def test_step_by_step_leaves_a_valid_history_between_steps(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("", ("echo", {"text": "a"}), ("echo", {"text": "b"})),
            reply("", ("echo", {})),
            reply("ok"),
        ]
    )
    loop = make_loop(tmp_path, model)
    loop.begin_turn("go")
    transitions = []
    while True:
        step = loop.step()
        transitions.append(step.transition)
        check_pairing(loop.messages)  # valid to send between any two steps
        if step.done:
            break
    assert transitions == ["tool_use", "tool_use", "completed"]
    with pytest.raises(HarnessError):
        loop.step()


def test_begin_turn_twice_is_refused(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, FakeModel([]))
    loop.begin_turn("one")
    with pytest.raises(HarnessError, match="already"):
        loop.begin_turn("two")


def test_max_turns_stops_and_next_turn_merges_into_the_tool_results(tmp_path: Path) -> None:
    model = FakeModel(
        [reply("", ("echo", {"text": "1"})), reply("", ("echo", {"text": "2"})), reply("fine")]
    )
    loop = make_loop(tmp_path, model, max_turns=2)
    result = loop.run_turn("loop forever")
    assert result.transition == "max_turns" and result.steps == 2
    assert loop.messages[-1].role == "user"
    again = loop.run_turn("please stop now")
    assert again.transition == "completed"
    merged = model.requests[-1].messages[-1]
    assert isinstance(merged.content[0], ToolResultBlock)
    assert merged.content[-1] == TextBlock(text="please stop now")
    check_pairing(loop.messages)


def test_budget_stops_before_the_next_call(tmp_path: Path) -> None:
    big = Usage(input_tokens=600, output_tokens=500)
    model = FakeModel([reply("", ("echo", {}), usage=big), reply("never")])
    loop = make_loop(tmp_path, model, budget_tokens=1000)
    result = loop.run_turn("spend")
    assert result.transition == "budget"
    assert len(model.requests) == 1


def test_interrupt_before_a_step(tmp_path: Path) -> None:
    model = FakeModel([])
    loop = make_loop(tmp_path, model)
    loop.begin_turn("x")
    loop.interrupt()
    assert loop.step().transition == "interrupted"
    assert model.requests == []


def test_interrupt_during_the_model_call_pairs_every_tool_use(tmp_path: Path) -> None:
    executor = FakeExecutor()
    holder: list[object] = []

    def slow(request: ModelRequest) -> object:
        # the interrupt arrives from another thread while the model is "thinking"
        t = threading.Thread(target=holder[0].interrupt)  # type: ignore[attr-defined]
        t.start()
        t.join()
        return reply("", ("echo", {"text": "rm"}), ("echo", {"text": "x"}))

    loop = make_loop(tmp_path, FakeModel([slow]), executor=executor)  # type: ignore[list-item]
    holder.append(loop)
    result = loop.run_turn("work")
    assert result.transition == "interrupted"
    assert executor.calls == []  # nothing ran
    last = loop.messages[-1]
    assert all(isinstance(b, ToolResultBlock) and b.is_error for b in last.content)
    check_pairing(loop.messages)
    # the interrupt flag does not leak into the next turn
    loop.model = FakeModel([reply("resumed")])
    assert loop.run_turn("continue").transition == "completed"


def test_inject_during_a_turn_lands_after_the_next_tool_results(tmp_path: Path) -> None:
    holder: list[object] = []

    def tool(i: dict[str, object]) -> str:
        t = threading.Thread(target=holder[0].inject, args=("message from bob",))  # type: ignore[attr-defined]
        t.start()
        t.join()
        return "tool output"

    model = FakeModel([reply("", ("work", {})), reply("saw it")])
    loop = make_loop(tmp_path, model, executor=FakeExecutor({"work": tool}))
    holder.append(loop)
    loop.run_turn("start")
    user = model.requests[1].messages[-1]
    assert isinstance(user.content[0], ToolResultBlock)
    assert user.content[1] == TextBlock(text="message from bob")
    assert not loop.has_pending()


def test_injected_message_after_the_turn_opens_the_next_turn(tmp_path: Path) -> None:
    model = FakeModel([reply("done"), reply("answered")])
    loop = make_loop(tmp_path, model)
    loop.run_turn("first")
    loop.inject("late message")
    assert loop.has_pending()
    assert loop.run_turn(None).text == "answered"
    assert model.requests[1].messages[-1].content == (TextBlock(text="late message"),)


def test_stop_hook_forces_one_continuation_then_allows(tmp_path: Path) -> None:
    seen: list[bool] = []

    def on_stop(text: str, active: bool) -> StopVerdict:
        seen.append(active)
        return StopVerdict("continue", "run the tests first")

    model = FakeModel([reply("done"), reply("tests pass, done")])
    loop = make_loop(tmp_path, model, hooks=LoopHooks(on_stop=on_stop))
    loop.begin_turn("fix it")
    first = loop.step()
    assert (first.transition, first.done) == ("stop_hook_feedback", False)
    second = loop.step()
    assert (second.transition, second.text) == ("completed", "tests pass, done")
    assert seen == [False, True]
    assert model.requests[1].messages[-1].content == (TextBlock(text="run the tests first"),)


def test_stop_hook_can_stop_the_turn(tmp_path: Path) -> None:
    hooks = LoopHooks(on_stop=lambda text, active: StopVerdict("stop", "policy says stop"))
    loop = make_loop(tmp_path, FakeModel([reply("done")]), hooks=hooks)
    result = loop.run_turn("x")
    assert (result.transition, result.text) == ("hook_stopped", "policy says stop")


def test_user_prompt_hook_blocks_or_adds_context(tmp_path: Path) -> None:
    def on_prompt(text: str) -> PromptVerdict:
        if "secret" in text:
            return PromptVerdict(blocked=True, reason="no secrets")
        return PromptVerdict(additional_context="today is Sunday")

    model = FakeModel([reply("ok")])
    loop = make_loop(tmp_path, model, hooks=LoopHooks(on_user_prompt=on_prompt))
    blocked = loop.run_turn("tell me the secret")
    assert (blocked.transition, blocked.text) == ("hook_stopped", "no secrets")
    assert model.requests == [] and loop.messages == []
    loop.run_turn("hello")
    assert model.requests[0].messages[0].content[-1] == TextBlock(text="today is Sunday")


def test_unknown_tool_is_an_error_result_not_a_crash(tmp_path: Path) -> None:
    model = FakeModel([reply("", ("nope", {})), reply("sorry")])
    loop = make_loop(tmp_path, model)
    assert loop.run_turn("x").transition == "completed"
    result = loop.messages[2].content[0]
    assert isinstance(result, ToolResultBlock) and result.is_error


def test_executor_that_raises_still_answers_every_call(tmp_path: Path) -> None:
    class Broken(FakeExecutor):
        def run_batch(self, calls: object, ctx: object) -> list[ToolResultBlock]:
            raise RuntimeError("boom")

    model = FakeModel([reply("", ("echo", {}), ("echo", {})), reply("ok")])
    loop = make_loop(tmp_path, model, executor=Broken())
    loop.run_turn("x")
    check_pairing(loop.messages)
    assert all(
        isinstance(b, ToolResultBlock) and "boom" in b.content for b in loop.messages[2].content
    )


def test_model_error_ends_the_turn_with_history_intact(tmp_path: Path) -> None:
    model = FakeModel(
        [reply("", ("echo", {})), ModelError("overloaded for good", kind="overloaded")]
    )
    loop = make_loop(tmp_path, model)
    result = loop.run_turn("x")
    assert result.transition == "error" and "overloaded" in (result.error or "")
    check_pairing(loop.messages)
    assert loop.messages[-1].role == "user"


def test_prompt_too_long_compacts_once_and_retries(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("", ("echo", {"text": "x" * 500})),
            PromptTooLong("prompt is too long: 210000 tokens > 200000 maximum"),
            reply("Summary: the user asked for x; echo ran."),
            reply("finished after compaction"),
        ]
    )
    loop = make_loop(tmp_path, model)
    loop.begin_turn("do x")
    assert loop.step().transition == "tool_use"
    step = loop.step()
    assert (step.transition, step.compacted) == ("completed", ("reactive",))
    summary_request, retry = model.requests[2], model.requests[3]
    assert summary_request.tools == ()
    first = retry.messages[0].content[0]
    assert isinstance(first, TextBlock) and "Summary: the user asked" in first.text
    check_pairing(retry.messages)


def test_prompt_too_long_twice_is_an_error(tmp_path: Path) -> None:
    model = FakeModel(
        [
            reply("", ("echo", {})),
            PromptTooLong("too long"),
            reply("a summary"),
            PromptTooLong("still too long"),
        ]
    )
    loop = make_loop(tmp_path, model)
    result = loop.run_turn("x")
    assert result.transition == "error" and "still too long" in (result.error or "")
    check_pairing(loop.messages)


def test_pairing_is_checked_before_every_request(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, FakeModel([]))
    use = ToolUseBlock(id="t1", name="echo", input={})
    loop.state.messages = [
        Message(role="user", content=(TextBlock(text="x"),)),
        Message(role="assistant", content=(use,)),
        Message(role="user", content=(TextBlock(text="forgot the result"),)),
    ]
    with pytest.raises(PairingError):
        loop.build_request()


@pytest.mark.parametrize(
    "messages",
    [
        [Message(role="assistant", content=(TextBlock(text="hi"),))],
        [
            Message(role="user", content=(TextBlock(text="x"),)),
            Message(role="assistant", content=(ToolUseBlock(id="a", name="t"),)),
        ],
        [
            Message(role="user", content=(TextBlock(text="x"),)),
            Message(role="assistant", content=(ToolUseBlock(id="a", name="t"),)),
            Message(
                role="user",
                content=(
                    ToolResultBlock(tool_use_id="a"),
                    ToolResultBlock(tool_use_id="a"),
                ),
            ),
        ],
        [Message(role="user", content=(ToolResultBlock(tool_use_id="z"),))],
        [
            Message(role="user", content=(TextBlock(text="x"),)),
            Message(role="user", content=(TextBlock(text="y"),)),
        ],
    ],
)
def test_check_pairing_rejects_broken_histories(messages: list[Message]) -> None:
    with pytest.raises(PairingError):
        check_pairing(messages)


def test_volatile_state_is_read_every_request_and_sent_at_the_tail(tmp_path: Path) -> None:
    counter = iter(range(100))
    model = FakeModel([reply("", ("echo", {})), reply("ok")])
    loop = make_loop(tmp_path, model, state=lambda: f"members: {next(counter)}")
    loop.run_turn("x")
    first, second = model.requests
    assert first.system == second.system and len(first.system) == 1 and first.system[0].cache
    assert "members" not in first.system[0].text
    assert "members: 0" in first.messages[-1].content[-1].model_dump()["text"]
    last = second.messages[-1].content  # the tool result, then the changed state
    assert isinstance(last[0], ToolResultBlock) and "members: 1" in last[-1].model_dump()["text"]
    assert second.messages[: len(first.messages)] == first.messages  # a stable prefix


# --- terminal tools ------------------------------------------------------------------------------


def _terminal_executor() -> FakeExecutor:
    tools = {
        "echo": lambda i: str(i.get("text", "")),
        "finish": lambda i: "ERROR refused" if i.get("refuse") else "finished",
    }
    return FakeExecutor(tools, terminal=frozenset({"finish"}))


def test_a_batch_ending_with_a_terminal_tool_ends_the_turn_without_another_call(
    tmp_path: Path,
) -> None:
    model = FakeModel([reply("wrapping up", ("echo", {"text": "a"}), ("finish", {}))])
    loop = make_loop(tmp_path, model, executor=_terminal_executor())
    result = loop.run_turn("do it")  # a second call would fail the FakeModel loudly
    assert (result.transition, result.text, result.steps) == ("completed", "wrapping up", 1)
    assert len(model.requests) == 1
    check_pairing(loop.messages)  # every tool_use has its tool_result
    assert [m.role for m in loop.messages] == ["user", "assistant", "user"]
    # the next turn's input joins the tool results: roles still alternate
    model.replies.append(reply("next"))
    assert loop.run_turn("again").text == "next"
    last = model.requests[-1].messages[-1]
    assert isinstance(last.content[0], ToolResultBlock)
    assert last.content[-1] == TextBlock(text="again")


def test_step_reports_which_terminal_tool_ended_the_turn(tmp_path: Path) -> None:
    loop = make_loop(
        tmp_path, FakeModel([reply("", ("finish", {}))]), executor=_terminal_executor()
    )
    loop.begin_turn("go")
    step = loop.step()
    assert (step.done, step.transition, step.ended_by) == (True, "completed", "finish")
    assert [r.content for r in step.tool_results] == ["finished"]


@pytest.mark.parametrize(
    "calls",
    [
        [("finish", {}), ("echo", {"text": "after"})],  # the terminal call is not the last
        [("echo", {"text": "ERROR broke"}), ("finish", {})],  # another call failed
        [("finish", {"refuse": True})],  # the terminal call itself failed
    ],
)
def test_a_terminal_tool_ends_the_turn_only_when_last_and_nothing_failed(
    tmp_path: Path, calls: list[tuple[str, dict[str, object]]]
) -> None:
    model = FakeModel([reply("", *calls), reply("then this")])
    loop = make_loop(tmp_path, model, executor=_terminal_executor())
    result = loop.run_turn("go")
    assert (result.text, result.steps) == ("then this", 2)


def test_a_message_injected_during_the_batch_keeps_the_turn_going(tmp_path: Path) -> None:
    executor = _terminal_executor()
    loop = make_loop(tmp_path, FakeModel([]), executor=executor)

    def finish(i: dict[str, object]) -> str:
        loop.inject("a question from the lead")
        return "finished"

    executor.tools["finish"] = finish
    model = FakeModel([reply("", ("finish", {})), reply("answered")])
    loop.model = model
    result = loop.run_turn("go")
    assert (result.text, result.steps) == ("answered", 2)
    assert model.requests[1].messages[-1].content[-1] == TextBlock(text="a question from the lead")


def test_stop_hooks_run_when_a_terminal_tool_ends_the_turn(tmp_path: Path) -> None:
    seen: list[str] = []

    def on_stop(text: str, active: bool) -> StopVerdict:
        seen.append(text)
        return StopVerdict("continue", "check the build first") if not active else StopVerdict()

    model = FakeModel([reply("done", ("finish", {})), reply("build ok")])
    hooks = LoopHooks(on_stop=on_stop)
    loop = make_loop(tmp_path, model, executor=_terminal_executor(), hooks=hooks)
    result = loop.run_turn("go")
    assert seen == ["done", "build ok"]
    assert (result.transition, result.text, result.steps) == ("completed", "build ok", 2)
    # the feedback joined the tool results in one user message
    sent = model.requests[1].messages[-1].content
    assert isinstance(sent[0], ToolResultBlock) and sent[-1] == TextBlock(
        text="check the build first"
    )
