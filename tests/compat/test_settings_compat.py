"""Every real Claude Code settings file is accepted where Claude Code users keep it.

Each file goes to ``<repo>/.claude/settings.json`` (``settings.local.json`` files to
``.claude/settings.local.json``) of a real repository with ``teamctl init`` done, and
``teamctl settings --json`` must exit 0 (warnings allowed, never a refusal), list every permission
rule of the file with the file and scope it came from, and every command hook of an event teamctl
fires. The same file must not stop ``teamctl status`` either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.settings import HOOK_EVENTS
from tests.actors.cli.cli_support import git_repo, run
from tests.compat import artifacts
from tests.compat.support import decide

SETTINGS = artifacts.of_kind("settings")

CLAUDE_SKIPS = {
    "settings/anthropics__claude-agent-sdk-python__settings.json": (
        "its hook entries put `type`/`command`/`prompt` where Claude Code expects a `hooks` "
        "array; Claude Code reports `hooks: Expected array, but received undefined` and, as its "
        'Settings Error says, skips the whole file ("Files with errors are skipped entirely")'
    ),
}
"""Real files Claude Code itself refuses to apply: the session still runs (a warning), and
nothing of the file is in effect, its allow rules included."""
VALID = tuple(a for a in SETTINGS if a.file not in CLAUDE_SKIPS)
SKIPPED = tuple(a for a in SETTINGS if a.file in CLAUDE_SKIPS)


def _place(root: Path, artifact: artifacts.Artifact) -> tuple[Path, str]:
    local = artifact.path.endswith("settings.local.json")
    dest = root / ".claude" / ("settings.local.json" if local else "settings.json")
    artifacts.install(artifact.file, dest)
    dest.chmod(0o644)
    return dest, "local" if local else "project"


@pytest.mark.parametrize("artifact", VALID, ids=[a.id for a in VALID])
def test_real_settings_file_is_accepted_and_read(
    artifact: artifacts.Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    dest, scope = _place(root, artifact)
    raw: dict[str, Any] = json.loads(dest.read_bytes())

    result = run(["settings", "--json"])
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    report = json.loads(result.stdout)

    listed = {(r["list"], r["rule"]) for r in report["rules"] if r["scope"] == scope}
    for kind in ("allow", "ask", "deny"):
        for rule in (raw.get("permissions") or {}).get(kind) or ():
            assert (kind, rule) in listed, f"{kind} rule {rule!r} of {artifact.file} not read"
    for r in report["rules"]:
        if r["scope"] == scope:
            assert Path(r["file"]).resolve() == dest.resolve()

    hooks = {(h["event"], h["command"]) for h in report["hooks"] if h["scope"] == scope}
    for event, matchers in (raw.get("hooks") or {}).items():
        if event not in HOOK_EVENTS:
            continue
        for matcher in matchers:
            for handler in matcher.get("hooks") or ():
                if handler.get("type") == "command" and "args" not in handler:
                    assert (event, handler["command"]) in hooks, (event, handler["command"])

    status = run(["status"])
    assert status.exit_code == 0, status.output
    assert "error" not in status.stderr.lower()


@pytest.mark.parametrize("artifact", SKIPPED, ids=[a.id for a in SKIPPED])
def test_a_file_claude_code_skips_is_skipped_with_a_warning_not_refused(
    artifact: artifacts.Artifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path, monkeypatch)
    dest, scope = _place(root, artifact)

    result = run(["settings", "--json"])
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    report = json.loads(result.stdout)
    assert any(str(dest) in w for w in report["warnings"]), report["warnings"]
    assert [r for r in report["rules"] if r["scope"] == scope] == []
    assert [h for h in report["hooks"] if h["scope"] == scope] == []
    status = run(["status"])
    assert status.exit_code == 0, status.output
    # Its blanket `Bash` allow is not in effect, as in Claude Code.
    assert decide(root, "bash", {"command": "rm -rf build"}) == "ask"


def test_every_settings_file_comes_with_its_source() -> None:
    repos = {a.repo for a in SETTINGS}
    assert len(SETTINGS) >= 14 and len(repos) >= 12, (len(SETTINGS), sorted(repos))
