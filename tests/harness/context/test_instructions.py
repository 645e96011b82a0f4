"""Project instructions (CLAUDE.md, .claude/CLAUDE.md, AGENTS.md, CLAUDE.local.md) in the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent import Agent, AgentConfig
from harness.context.instructions import import_paths, load_instructions
from harness.model.scripted import ScriptedModel
from harness.permissions.checks import Permissions
from harness.permissions.policy import HarnessPolicy
from harness.tools.base import ToolPolicy
from tests.support.fakes import AllowAll


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    return repo


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def agent_for(repo: Path, policy: ToolPolicy | None = None, cwd: Path | None = None) -> Agent:
    return Agent(
        AgentConfig(name="lead", model="fake-model"),
        root=repo,
        cwd=cwd,
        model=ScriptedModel({"agents": {}}),
        policy=policy or AllowAll(),
    )


def test_every_instruction_file_is_in_the_cached_block_in_order(home: Path, repo: Path) -> None:
    write(home / ".claude" / "CLAUDE.md", "USER: answer in English")
    write(repo / "CLAUDE.md", "PROJECT: run make test")
    write(repo / ".claude" / "CLAUDE.md", "DOTCLAUDE: use ruff")
    write(repo / "AGENTS.md", "AGENTS: keep commits small")
    write(repo / "CLAUDE.local.md", "LOCAL: my sandbox is sandbox-7")
    agent = agent_for(repo)
    static, *dynamic = agent.system.blocks()
    assert static.cache
    order = [static.text.index(m) for m in ("USER:", "PROJECT:", "DOTCLAUDE:", "AGENTS:", "LOCAL:")]
    assert order == sorted(order)
    assert f"Contents of {repo / 'CLAUDE.local.md'} (user's private project" in static.text
    assert f"Contents of {home / '.claude' / 'CLAUDE.md'} (user's private global" in static.text
    assert all("PROJECT:" not in b.text for b in dynamic)


def test_instructions_are_read_once_so_the_prompt_stays_byte_stable(home: Path, repo: Path) -> None:
    claude = write(repo / "CLAUDE.md", "first version")
    agent = agent_for(repo)
    before = agent.system.blocks()[0].text
    claude.write_text("second version")
    assert agent.system.blocks()[0].text == before
    assert "first version" in before


def test_directories_from_root_to_cwd_are_read_but_not_siblings(home: Path, repo: Path) -> None:
    write(repo / "CLAUDE.md", "ROOT")
    write(repo / "pkg" / "CLAUDE.md", "PKG")
    write(repo / "pkg" / "sub" / "CLAUDE.local.md", "SUB")
    write(repo / "other" / "CLAUDE.md", "OTHER")
    write(repo.parent / "CLAUDE.md", "ABOVE THE ROOT")
    text = agent_for(repo, cwd=repo / "pkg" / "sub").system.blocks()[0].text
    assert text.index("ROOT") < text.index("PKG") < text.index("SUB")
    assert "OTHER" not in text and "ABOVE THE ROOT" not in text


def test_imports_are_relative_to_the_importing_file(home: Path, repo: Path) -> None:
    write(repo / "CLAUDE.md", "See @notes/guide.md and @~/.claude/mine.md.")
    write(repo / "notes" / "guide.md", "GUIDE, then @style.md")
    write(repo / "notes" / "style.md", "STYLE")
    write(repo / "style.md", "WRONG STYLE")
    write(home / ".claude" / "mine.md", "MINE")
    loaded = load_instructions(repo, home=home)
    texts = [f.text for f in loaded.files]
    assert texts[1:] == ["GUIDE, then @style.md", "STYLE", "MINE"]
    assert loaded.files[2].imported_by == repo / "notes" / "guide.md"
    assert f"(imported by {repo / 'notes' / 'guide.md'})" in loaded.text()


def test_no_imports_in_code_spans_blocks_or_addresses() -> None:
    text = (
        "Read @a.md and mail dev@example.com.\n"
        "Not `@b.md` here.\n"
        "```\n@c.md\n```\n"
        "~~~md\n@d.md\n~~~\n"
        "@e.md at line start, @with\\ space.md\n"
    )
    assert import_paths(text) == ["a.md", "e.md", "with space.md"]


def test_imports_stop_after_five_hops_and_cycles_end(home: Path, repo: Path) -> None:
    write(repo / "CLAUDE.md", "@f1.md")
    for i in range(1, 8):
        write(repo / f"f{i}.md", f"F{i} @f{i + 1}.md @CLAUDE.md")
    loaded = load_instructions(repo, home=home)
    assert [f.path.name for f in loaded.files] == ["CLAUDE.md"] + [f"f{i}.md" for i in range(1, 6)]
    assert any("at most 5 hops" in n for n in loaded.notes)


def test_project_files_cannot_import_outside_the_repository(home: Path, repo: Path) -> None:
    secret = write(repo.parent / "outside" / "secret.txt", "OUTSIDE SECRET")
    write(home / ".ssh" / "id_rsa", "PRIVATE KEY")
    write(home / ".claude" / ".credentials.json", '{"token": "T"}')
    write(repo / "CLAUDE.md", f"@{secret} @~/.ssh/id_rsa @~/.claude/.credentials.json @../x")
    loaded = load_instructions(repo, home=home)
    text = loaded.text()
    assert "OUTSIDE SECRET" not in text and "PRIVATE KEY" not in text and '"T"' not in text
    assert sum("may import only" in n for n in loaded.notes) == 3


def test_the_users_own_file_may_import_anything(home: Path, repo: Path) -> None:
    shared = write(home / "notes" / "shared.txt", "SHARED NOTES")
    write(home / ".claude" / "CLAUDE.md", f"@{shared}")
    assert "SHARED NOTES" in load_instructions(repo, home=home).text()


def test_a_file_a_deny_rule_covers_never_reaches_the_prompt(home: Path, repo: Path) -> None:
    write(repo / ".env", "SECRET_KEY=hunter2")
    write(repo / "CLAUDE.md", "Config lives in @.env")
    write(repo / "AGENTS.md", "AGENTS TEXT")
    policy = HarnessPolicy(Permissions(deny=["Read(./.env)", "Read(./AGENTS.md)"]))
    text = agent_for(repo, policy).system.blocks()[0].text
    assert "Config lives in" in text
    assert "hunter2" not in text and "AGENTS TEXT" not in text


def test_agents_md_imported_by_claude_md_is_loaded_once(home: Path, repo: Path) -> None:
    write(repo / "CLAUDE.md", "@AGENTS.md")
    write(repo / "AGENTS.md", "SHARED AGENT RULES")
    text = load_instructions(repo, home=home).text()
    assert text.count("SHARED AGENT RULES") == 1


def test_oversize_files_are_cut_with_a_note(home: Path, repo: Path) -> None:
    write(repo / "CLAUDE.md", "A" * 500)
    write(repo / "AGENTS.md", "B" * 500)
    write(repo / "CLAUDE.local.md", "C" * 10)
    loaded = load_instructions(repo, home=home, max_file_chars=300, max_total_chars=400)
    text = loaded.text()
    assert "A" * 300 in text and "A" * 301 not in text
    assert f"[Truncated: {repo / 'CLAUDE.md'} has 500 characters, only the first 300" in text
    assert "B" * 101 not in text and "B" * 100 in text
    assert f"not loaded (instructions size cap reached): {repo / 'CLAUDE.local.md'}" in text


def test_no_instruction_files_no_section(home: Path, repo: Path) -> None:
    assert load_instructions(repo, home=home).text() == ""
    assert "Project instructions" not in agent_for(repo).system.blocks()[0].text
