"""Skills as found in the wild: Claude Code's folders and precedence, and the ``allowed-tools`` and
``model`` frontmatter honoured while a skill is active."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.agent import Agent, AgentConfig
from harness.context.skills import SkillLibrary, parse_skill, split_tools
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.ports import ModelRequest, ModelResponse, ToolResultBlock
from harness.tools.base import ToolPolicy

WEBAPP_TESTING = """\
---
name: webapp-testing
description: Toolkit for interacting with and testing local web applications using Playwright.
license: Complete terms in LICENSE.txt
---

# Web Application Testing

To test local web applications, write native Python Playwright scripts.
"""

RELEASE = """\
---
name: release-notes
description: Draft release notes from the git history of this repository.
license: Apache-2.0
allowed-tools: Bash(mkdir:*), Bash(git push:*) Read
model: haiku
metadata:
  version: "1.2"
  author: example
argument-hint: "[version]"
disable-model-invocation: false
some-future-key: {nested: [1, 2]}
---
Make a `notes` folder, then write the notes.
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("TEAMCTL_MODEL", raising=False)
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    return repo


def put(base: Path, folder: str, text: str) -> Path:
    path = base / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def named(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nbody of {description}\n"


def test_claude_code_folders_and_precedence(home: Path, repo: Path) -> None:
    put(repo / ".claude" / "skills", "a", named("shared", "project copy"))
    put(repo / ".claude" / "skills", "p", named("project-only", "from the repo"))
    put(home / ".claude" / "skills", "b", named("shared", "personal copy"))
    put(home / ".claude" / "skills", "me", named("mine", "personal only"))
    put(repo / ".claude" / "skills", "t", named("team-wins", "project copy"))
    put(home / ".claude" / "skills", "t", named("team-wins", "personal copy"))
    put(repo / ".team" / "skills", "t", named("team-wins", "team copy"))
    lib = SkillLibrary(repo)
    assert list(lib.skills) == ["mine", "project-only", "shared", "team-wins"]
    # Claude Code: a personal skill overrides a project skill; our team folder overrides both.
    assert lib.skills["shared"].description == "personal copy"
    assert lib.skills["team-wins"].description == "team copy"
    assert (lib.skills["mine"].scope, lib.skills["project-only"].scope) == ("personal", "project")


def test_skills_shaped_like_anthropics_skills_load(home: Path, repo: Path) -> None:
    put(repo / ".claude" / "skills", "webapp-testing", WEBAPP_TESTING)
    put(repo / ".claude" / "skills", "release-notes", RELEASE)
    lib = SkillLibrary(repo)
    assert lib.errors == []
    release = lib.skills["release-notes"]
    assert release.allowed_tools == ("Bash(mkdir:*)", "Bash(git push:*)", "Read")
    assert release.model == "claude-haiku-4-5"
    assert lib.skills["webapp-testing"].allowed_tools == ()
    assert "Playwright scripts" in lib.load("webapp-testing")


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        ("Read, Grep, Glob", ["Read", "Grep", "Glob"]),
        ("Read Grep Bash(git diff *)", ["Read", "Grep", "Bash(git diff *)"]),
        (
            ["Read", "Bash(git log --oneline:*), Edit"],
            ["Read", "Bash(git log --oneline:*)", "Edit"],
        ),
        (None, []),
    ],
)
def test_allowed_tools_string_or_list(value: Any, entries: list[str]) -> None:
    assert split_tools(value) == entries


def test_allowed_tools_use_our_rule_names(tmp_path: Path) -> None:
    text = (
        "---\ndescription: d\nallowed-tools:\n  - TodoWrite\n  - Skill(pdf)\n  - Task\n"
        "  - mcp__github__get_issue\n  - Bash(\n---\nbody\n"
    )
    skill, _ = parse_skill(put(tmp_path, "x", text))
    assert skill.allowed_tools == (
        "todo_write",
        "load_skill(pdf)",
        "task",
        "mcp__github__get_issue",
    )
    assert len(skill.notes) == 1 and "Bash(" in skill.notes[0]


def test_model_values(tmp_path: Path) -> None:
    def model_of(value: str) -> str | None:
        skill, _ = parse_skill(put(tmp_path, value, f"---\ndescription: d\nmodel: {value}\n---\n"))
        return skill.model

    assert model_of("opus") == "claude-opus-4-8"
    assert model_of("claude-sonnet-4-5-20250929") == "claude-sonnet-4-5-20250929"
    assert model_of("inherit") is None
    assert model_of("gpt-4") is None


class Recording:
    """A model client that records the model of every request."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.models: list[str] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.models.append(request.model)
        return self.inner.complete(request)


def skill_agent(
    repo: Path, turns: list[list[dict[str, Any]]], policy: ToolPolicy
) -> tuple[Agent, Recording]:
    steps: list[dict[str, Any]] = []
    for calls in turns:
        steps += [{"tool_uses": [c]} for c in calls] + [{"text": "done"}]
    model = Recording(ScriptedModel({"agents": {"lead": {"steps": steps}}}))
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"), root=repo, model=model, policy=policy
    )
    return agent, model


def results(agent: Agent) -> list[ToolResultBlock]:
    return [b for m in agent.messages for b in m.content if isinstance(b, ToolResultBlock)]


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "input": {"command": command}}


LOAD = {"name": "load_skill", "input": {"name": "release-notes"}}


def test_allowed_tools_run_without_asking_for_the_rest_of_the_turn(home: Path, repo: Path) -> None:
    put(repo / ".claude" / "skills", "release-notes", RELEASE)
    # No approver: whatever asks is refused. Deny rules and protected files still win.
    policy = HarnessPolicy(Permissions(deny=["Bash(git push:*)"]))
    write_config = {"name": "write_file", "input": {"path": ".mcp.json", "content": "{}"}}
    agent, _ = skill_agent(
        repo,
        [
            [bash("mkdir before"), LOAD, bash("mkdir notes"), bash("git push origin main")],
            [write_config, bash("mkdir later")],
        ],
        policy,
    )
    agent.run_turn("write the release notes")
    before, loaded, made, push = results(agent)
    assert before.is_error and "needs approval" in before.content
    assert "Bash(mkdir:*), Bash(git push:*), Read" in loaded.content
    assert not made.is_error and (repo / "notes").is_dir()
    assert push.is_error and "denied by rule Bash(git push:*)" in push.content
    agent.run_turn("next")  # a new turn: the skill is no longer active
    protected, later = results(agent)[4:]
    assert protected.is_error and not (repo / ".mcp.json").exists()
    assert later.is_error and not (repo / "later").exists()


def test_a_skills_model_is_used_for_the_rest_of_the_turn(
    home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(repo / ".claude" / "skills", "release-notes", RELEASE)
    policy = HarnessPolicy(Permissions())
    agent, model = skill_agent(repo, [[LOAD, bash("true")], []], policy)
    agent.run_turn("go")
    assert model.models == ["fake-model", "claude-haiku-4-5", "claude-haiku-4-5"]
    assert "The rest of this turn uses model claude-haiku-4-5." in results(agent)[0].content
    agent.run_turn("again")
    assert model.models[3:] == ["fake-model"]


def test_teamctl_model_pins_the_model_over_a_skill(
    home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMCTL_MODEL", "fake-model")
    put(repo / ".claude" / "skills", "release-notes", RELEASE)
    agent, model = skill_agent(repo, [[LOAD]], HarnessPolicy(Permissions()))
    agent.run_turn("go")
    assert model.models == ["fake-model", "fake-model"]


def test_a_subagent_of_the_turn_has_the_skills_grants(home: Path, repo: Path) -> None:
    put(repo / ".claude" / "skills", "release-notes", RELEASE)
    script = {
        "lead": {
            "steps": [
                {"tool_uses": [LOAD]},
                {
                    "tool_uses": [
                        {
                            "name": "task",
                            "input": {"description": "mkdir", "prompt": "make the folder"},
                        }
                    ]
                },
                {"text": "done"},
            ]
        },
        "lead.task-1": {"steps": [{"tool_uses": [bash("mkdir by-sub")]}, {"text": "made"}]},
    }
    agent = Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=repo,
        model=ScriptedModel({"agents": script}),
        policy=HarnessPolicy(Permissions()),
    )
    agent.run_turn("go")
    assert (repo / "by-sub").is_dir()
    assert "granted_allow_rules" in agent.tool_context.extra  # the subagent left them in place
