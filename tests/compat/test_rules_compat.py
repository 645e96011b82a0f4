"""The permission rules of real settings files decide as Claude Code decides.

Each case puts one real file at ``<repo>/.claude/settings.json`` (or ``settings.local.json``) and
sends concrete calls of our tools through the policy ``teamctl ask`` builds from it
(``support.decide``). Expected answers follow Claude Code's permissions reference: deny wins over
ask and allow, in every mode including ``bypassPermissions``; ``Bash(x:*)`` and ``Bash(x *)`` are
prefix rules on word boundaries, the trailing `` *`` optional; a prefix rule does not cover a
command with leading variable assignments it does not name, nor a compound command; with no
rule, ``default`` asks before a shell command.

One deliberate difference (issue 13, "deny means deny"): Claude Code applies ``Read(...)`` deny
rules to its file tools only (its permissions page: ``cat .env`` in Bash is not blocked without
the sandbox); teamctl also refuses shell commands that read a denied file, so those cases expect
``deny``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.settings import PermissionMode
from tests.compat import artifacts
from tests.compat.support import MODES, decide, git_repo


def repo_with(tmp_path: Path, file: str) -> Path:
    root = git_repo(tmp_path)
    local = file.endswith("settings.local.json")
    name = "settings.local.json" if local else "settings.json"
    artifacts.install(file, root / ".claude" / name).chmod(0o644)
    (root / "build").mkdir()
    (root / ".env").write_text("SECRET_KEY=compat-secret\n")
    return root


JP = "settings/jpoley__jp-spec-kit__settings.json"
TOB = "settings/trailofbits__claude-code-config__settings.json"


@pytest.mark.parametrize("mode", MODES)
def test_jp_spec_kit_deny_rules_hold_in_every_mode(tmp_path: Path, mode: PermissionMode) -> None:
    root = repo_with(tmp_path, JP)
    assert decide(root, "bash", {"command": "rm -rf build"}, mode) == "deny"  # Bash(rm -rf:*)
    assert decide(root, "bash", {"command": "curl https://example.test"}, mode) == "deny"
    assert decide(root, "bash", {"command": "sudo ls"}, mode) == "deny"
    assert decide(root, "read_file", {"path": ".env"}, mode) == "deny"  # Read(./.env)
    assert decide(root, "bash", {"command": "cat .env"}, mode) == "deny"
    assert decide(root, "write_file", {"path": "CLAUDE.md", "content": "x"}, mode) == "deny"


@pytest.mark.parametrize("mode", MODES)
def test_trailofbits_deny_rules_hold_in_every_mode(tmp_path: Path, mode: PermissionMode) -> None:
    root = repo_with(tmp_path, TOB)
    assert decide(root, "bash", {"command": "rm -rf build"}, mode) == "deny"  # Bash(rm -rf *)
    assert decide(root, "bash", {"command": "rm -rf"}, mode) == "deny"  # the ` *` is optional
    assert decide(root, "bash", {"command": "git push --force origin x"}, mode) == "deny"
    assert decide(root, "bash", {"command": "git reset --hard HEAD~1"}, mode) == "deny"
    ssh = Path.home() / ".ssh" / "id_rsa"
    ssh.parent.mkdir(parents=True)
    ssh.write_text("-----BEGIN KEY-----\n")
    assert decide(root, "bash", {"command": f"cat {ssh}"}, mode) == "deny"  # Read(~/.ssh/**)
    assert decide(root, "bash", {"command": "cat ~/.ssh/id_rsa"}, mode) == "deny"


def test_strict_example_asks_for_every_shell_command_even_in_bypass(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/anthropics__claude-code__settings-strict.json")
    assert decide(root, "bash", {"command": "ls"}) == "ask"  # ask: ["Bash"]
    assert decide(root, "bash", {"command": "ls"}, "acceptEdits") == "ask"
    assert decide(root, "read_file", {"path": ".env"}) == "allow"


def test_sentry_allow_rules(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/getsentry__sentry__settings.json")
    assert decide(root, "bash", {"command": "git status"}) == "allow"  # Bash(git status:*)
    assert decide(root, "bash", {"command": "git diff HEAD~1"}) == "allow"
    assert decide(root, "bash", {"command": "pytest tests/sentry -k x"}) == "allow"
    assert decide(root, "bash", {"command": "git push origin main"}) == "ask"
    assert decide(root, "bash", {"command": "git status && rm -rf build"}) == "ask"
    assert decide(root, "bash", {"command": "DOCKER_HOST=evil pytest"}) == "ask"


def test_pydantic_ai_allow_rules(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/pydantic__pydantic-ai__settings.json")
    assert decide(root, "bash", {"command": "uv run pytest tests"}) == "allow"  # Bash(uv run:*)
    assert decide(root, "bash", {"command": "git log --oneline -5"}) == "allow"
    assert decide(root, "bash", {"command": "make"}) == "allow"  # Bash(make:*), bare
    assert decide(root, "bash", {"command": "makefoo"}) == "ask"  # a word boundary
    # The rule that names the variable covers it; others do not.
    assert (
        decide(root, "bash", {"command": "PYRIGHT_PYTHON_IGNORE_WARNINGS=1 uv run pyright x"})
        == "allow"
    )
    assert decide(root, "bash", {"command": "EVIL=1 make"}) == "ask"
    assert decide(root, "bash", {"command": "git push"}) == "ask"


def test_home_assistant_space_star_rule(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/home-assistant__core__settings.json")
    assert decide(root, "bash", {"command": "git fetch origin"}) == "allow"  # Bash(git fetch *)
    assert decide(root, "bash", {"command": "git fetch"}) == "allow"
    assert decide(root, "bash", {"command": "git fetchx"}) == "ask"


def test_logfire_exact_and_prefix_rules(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/pydantic__logfire__settings.json")
    assert decide(root, "bash", {"command": "git push origin HEAD"}) == "allow"  # exact
    assert decide(root, "bash", {"command": "git push origin HEAD --force"}) == "ask"
    assert decide(root, "bash", {"command": "git checkout main"}) == "allow"


def test_local_settings_allow_rules(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/PostHog__posthog__settings.local.json")
    assert decide(root, "bash", {"command": "ruff check ."}) == "allow"
    assert decide(root, "bash", {"command": "ruff format ."}) == "ask"
    (tmp_path / "b").mkdir()
    other = repo_with(tmp_path / "b", "settings/microsoft__vscode__settings.local.json")
    assert decide(other, "bash", {"command": "cat README.md"}) == "allow"  # Bash(cat:*)


def test_disler_allows_writes_and_listed_commands(tmp_path: Path) -> None:
    root = repo_with(tmp_path, "settings/disler__claude-code-hooks-mastery__settings.json")
    assert decide(root, "write_file", {"path": "notes.md", "content": "x"}) == "allow"  # Write
    assert decide(root, "bash", {"command": "mkdir -p out"}) == "allow"
    assert decide(root, "bash", {"command": "git push"}) == "ask"


@pytest.mark.parametrize("mode", MODES)
def test_an_allow_rule_never_beats_a_deny_rule_of_another_scope(
    tmp_path: Path, mode: PermissionMode
) -> None:
    """The vscode local file allows ``cat``; jp-spec-kit's project file denies reading ``.env``:
    deny wins wherever it comes from."""
    root = repo_with(tmp_path, JP)
    artifacts.install(
        "settings/microsoft__vscode__settings.local.json",
        root / ".claude" / "settings.local.json",
    ).chmod(0o644)
    assert decide(root, "bash", {"command": "cat .env"}, mode) == "deny"
    assert decide(root, "read_file", {"path": ".env"}, mode) == "deny"
