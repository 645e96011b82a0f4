"""``teamctl ask``: run_ask in-process with the scripted model and through the fake API."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from harness.errors import ModelError
from harness.headless import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SCHEMA,
    extract_json,
    run_ask,
    schema_errors,
)
from harness.model.anthropic_client import AnthropicModel
from harness.model.scripted import ScriptedModel
from harness.ports import ModelClient
from harness.tools.base import Approver, ToolPolicy
from tests.harness.conftest import FakeApiFactory
from tests.harness.loop_support import FakeModel
from tests.support.fakes import AllowAll, FakeClock

SCHEMA = {
    "type": "object",
    "properties": {
        "files": {"type": "integer", "minimum": 0},
        "names": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["files", "names"],
    "additionalProperties": False,
}


def allow_all(root: Path, mode: str, approver: Approver | None) -> ToolPolicy:
    return AllowAll()


def ask(root: Path, model: ModelClient, prompt: str = "go", **kw: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        root, prompt, model_client=model, policy_factory=allow_all, out=out, err=err, **kw
    )
    return code, out.getvalue(), err.getvalue()


def scripted(*steps: Any) -> ScriptedModel:
    return ScriptedModel({"agents": {"ask": {"steps": list(steps)}}})


def test_text_output(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    model = scripted(
        {"tool_uses": [{"name": "read_file", "input": {"path": "a.txt"}}]},
        {"match": "alpha", "text": "It says alpha."},
    )
    assert ask(tmp_path, model) == (EXIT_OK, "It says alpha.\n", "")
    model.assert_consumed()


def test_json_output_and_max_turns(tmp_path: Path) -> None:
    model = scripted({"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]})
    code, out, _ = ask(tmp_path, model, output_format="json", max_turns=1)
    result = json.loads(out)
    assert code == EXIT_FAILED
    assert (result["type"], result["subtype"], result["is_error"]) == (
        "result",
        "error_max_turns",
        True,
    )
    assert result["num_turns"] == 1


def test_stream_json_emits_init_messages_and_result(tmp_path: Path) -> None:
    model = scripted({"tool_uses": [{"name": "glob", "input": {"pattern": "*"}}]}, "done")
    code, out, _ = ask(tmp_path, model, output_format="stream-json")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == EXIT_OK
    assert [e["type"] for e in events] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "result",
    ]
    assert events[0]["subtype"] == "init" and "read_file" in events[0]["tools"]
    assert events[-1]["result"] == "done" and events[-1]["subtype"] == "success"
    assert len({e["session_id"] for e in events}) == 1


def test_model_error_is_one_line_on_stderr(tmp_path: Path) -> None:
    model = FakeModel([ModelError("overloaded after 8 retries", kind="overloaded")])
    code, out, err = ask(tmp_path, model)
    assert (code, out) == (EXIT_FAILED, "")
    assert err == "teamctl ask: error_during_execution: overloaded after 8 retries\n"


def test_json_schema_repaired_after_a_bad_answer(tmp_path: Path) -> None:
    model = scripted(
        "There are 2 files.",
        {"match": "does not validate", "text": '```json\n{"files": 2, "names": ["a", 3]}\n```'},
        {"match": "names\\[1\\]", "text": '{"files": 2, "names": ["a", "b"]}'},
    )
    code, out, _ = ask(tmp_path, model, output_format="json", json_schema=SCHEMA)
    result = json.loads(out)
    assert code == EXIT_OK and result["structured_output"] == {"files": 2, "names": ["a", "b"]}
    assert result["num_turns"] == 3


def test_json_schema_never_valid_is_a_distinct_error(tmp_path: Path) -> None:
    model = scripted("nope", "still nope", "never")
    code, out, err = ask(tmp_path, model, json_schema=SCHEMA, max_schema_repairs=2)
    assert code == EXIT_SCHEMA and out == "" and "error_json_schema" in err
    model.assert_consumed()


def test_resume_continues_the_last_session(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "agents": {
                "ask": {"steps": ["first answer", {"match": "follow-up", "text": "second answer"}]}
            }
        }
    )
    code, out, _ = ask(tmp_path, model, "question one", output_format="json")
    session = json.loads(out)["session_id"]
    code, out, _ = ask(tmp_path, model, "follow-up", output_format="json", resume=True)
    assert code == EXIT_OK and json.loads(out)["session_id"] == session
    transcript = (tmp_path / ".team" / "transcripts" / "ask.jsonl").read_text()
    assert "question one" in transcript and "second answer" in transcript


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"files": 1, "names": []}, True),
        ({"files": -1, "names": []}, False),
        ({"files": 1.0, "names": []}, True),
        ({"files": True, "names": []}, False),
        ({"files": 1}, False),
        ({"files": 1, "names": [], "x": 1}, False),
        ([], False),
    ],
)
def test_schema_subset(value: Any, ok: bool) -> None:
    assert (schema_errors(value, SCHEMA) == []) is ok


def test_schema_combinators_and_strings() -> None:
    schema = {"anyOf": [{"type": "string", "pattern": "^v\\d+$"}, {"type": "null"}]}
    assert schema_errors("v12", schema) == [] and schema_errors(None, schema) == []
    assert schema_errors("x", schema) and schema_errors(
        3, {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    )
    assert schema_errors("abc", {"type": "string", "maxLength": 2})
    assert schema_errors("b", {"enum": ["a"]})


def test_schema_refs_formats_and_messages_name_the_path() -> None:
    schema = {
        "$defs": {"name": {"type": "string", "minLength": 1}},
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"$ref": "#/$defs/name"}}},
    }
    assert schema_errors({"names": ["a", "b"]}, schema) == []
    assert schema_errors({"names": ["a", ""]}, schema) == ["$.names[1]: '' should be non-empty"]


def test_extract_json_variants() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json("Here:\n```json\n[1, 2]\n```\nthanks") == [1, 2]
    assert extract_json('The result is {"a": {"b": 2}} as asked.') == {"a": {"b": 2}}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_ask_through_the_fake_api_with_the_real_sdk(
    tmp_path: Path, fake_api: FakeApiFactory, clock: FakeClock
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("def f():\n    return 1\n")
    script = {
        "agents": {
            "ask": {
                "steps": [
                    {
                        "tool_uses": [
                            {"name": "read_file", "input": {"path": "src/m.py"}},
                            {
                                "name": "edit_file",
                                "input": {
                                    "path": "src/m.py",
                                    "old_string": "return 1",
                                    "new_string": "return 2",
                                },
                            },
                        ]
                    },
                    {"match": "(?i)edit|replace|updated", "text": "Changed it."},
                    {"match": "does not validate", "text": '{"files": 1, "names": ["src/m.py"]}'},
                ]
            }
        }
    }
    server = fake_api(script)
    client = anthropic.Anthropic(api_key="test-key", base_url=server.base_url)
    model = AnthropicModel("claude-sonnet-4-6", client=client, clock=clock)
    code, out, _ = ask(tmp_path, model, "make f return 2", output_format="json", json_schema=SCHEMA)
    result = json.loads(out)
    assert code == EXIT_OK, result
    assert result["structured_output"] == {"files": 1, "names": ["src/m.py"]}
    assert (tmp_path / "src" / "m.py").read_text() == "def f():\n    return 2\n"
    assert len(server.requests) == 3 and server.script_errors == []


STOP_ONCE = """\
import json, os, sys
event = json.load(sys.stdin)
seen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seen-" + event["session_id"])
if event["hook_event_name"] != "Stop" or os.path.exists(seen):
    sys.exit(0)
assert os.path.isfile(event["transcript_path"]), event["transcript_path"]
open(seen, "w").close()
print(json.dumps({"decision": "block", "reason": "Go over it once more."}))
"""


def test_ask_runs_the_repositorys_stop_hook(tmp_path: Path) -> None:
    # A Stop hook from .claude/settings.json keeps `teamctl ask` going: run_ask passes its own
    # on_message callback, which must not replace the hooks the settings configure.
    hook = tmp_path / "stop_once.py"
    hook.write_text(STOP_ONCE)
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps(
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"python3 {hook}"}]}]}}
        )
    )
    model = scripted({"text": "First pass."}, {"match": "once more", "text": "Second pass."})
    from actors.cli.ask import default_policy_factory

    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        tmp_path, "go", model_client=model, policy_factory=default_policy_factory, out=out, err=err
    )
    assert code == 0, err.getvalue()
    assert out.getvalue().strip().endswith("Second pass."), out.getvalue()
    assert len(list(tmp_path.glob("seen-*"))) == 1


def test_additional_directories_reach_the_file_tools(tmp_path: Path) -> None:
    from actors.cli.ask import default_policy_factory

    repo, shared = tmp_path / "repo", tmp_path / "shared"
    repo.mkdir()
    shared.mkdir()
    (shared / "notes.txt").write_text("shared notes\n")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"additionalDirectories": ["../shared"]}})
    )
    model = scripted(
        {"tool_uses": [{"name": "read_file", "input": {"path": str(shared / "notes.txt")}}]},
        {"match": "shared notes", "text": "saw the shared notes"},
    )
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        repo, "go", model_client=model, policy_factory=default_policy_factory, out=out, err=err
    )
    assert code == 0, err.getvalue()
    assert out.getvalue().strip().endswith("saw the shared notes"), out.getvalue()
