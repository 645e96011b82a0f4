"""Settings scopes as Claude Code users have them: real files in ``tmp_path`` for every scope
(``HOME`` pointed there), precedence, provenance, warnings for Claude Code keys teamctl does not
implement, errors naming the file a bad key is in, Claude Code's ``sandbox`` block mapped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.settings import (
    SETTINGS_ENV,
    LoadedSettings,
    SettingsError,
    load_scoped_settings,
    load_settings,
    parse_settings,
)
from harness.settings import HookSettings, SandboxSettings


class Scopes:
    """A home folder and a repository with every scope's settings file in reach."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.root = tmp_path / "repo"
        self.extra = tmp_path / "extra.json"
        (self.root / ".team").mkdir(parents=True)
        self.environ: dict[str, str] = {"HOME": str(self.home)}

    def path(self, scope: str) -> Path:
        return {
            "user": self.home / ".claude" / "settings.json",
            "project": self.root / ".claude" / "settings.json",
            "local": self.root / ".claude" / "settings.local.json",
            "team": self.root / ".team" / "settings.json",
            "env": self.extra,
        }[scope]

    def write(self, scope: str, value: Any) -> Path:
        path = self.path(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value) if not isinstance(value, str) else value)
        if scope == "env":
            self.environ[SETTINGS_ENV] = str(path)
        return path

    def load(self) -> LoadedSettings:
        return load_scoped_settings(self.path("team"), self.environ)


@pytest.fixture
def scopes(tmp_path: Path) -> Scopes:
    return Scopes(tmp_path)


SCOPES = ("user", "project", "local", "team", "env")


def test_every_scope_is_read_lowest_first_and_the_higher_scope_wins(scopes: Scopes) -> None:
    for n, scope in enumerate(SCOPES):
        scopes.write(
            scope,
            {
                "env": {"WHO": scope, f"ONLY_{scope.upper()}": str(n)},
                "permissions": {"allow": [f"Bash(echo {scope})"]},
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"command": scope}]}]},
            },
        )
    scopes.write("project", {**json.loads(scopes.path("project").read_text()), "model": "x"})
    loaded = scopes.load()
    settings = loaded.settings
    assert settings.env["WHO"] == "env"  # the highest scope wins per variable
    assert {k for k in settings.env if k.startswith("ONLY_")} == {
        f"ONLY_{s.upper()}" for s in SCOPES
    }
    # rule lists and hooks concatenate, lowest scope first, each with its file
    assert settings.permissions.allow == tuple(f"Bash(echo {s})" for s in SCOPES)
    assert [(r.kind, r.rule, r.file.scope, r.file.path) for r in loaded.rules] == [
        ("allow", f"Bash(echo {s})", s, scopes.path(s)) for s in SCOPES
    ]
    assert [h.command for h in settings.hooks["PreToolUse"][0].hooks] == ["user"]
    assert [m.hooks[0].command for m in settings.hooks["PreToolUse"]] == list(SCOPES)
    assert [(h.event, h.matcher, h.command, h.file.scope) for h in loaded.hooks] == [
        ("PreToolUse", "Bash", s, s) for s in SCOPES
    ]
    assert [(f.scope, exists) for f, exists in loaded.files] == [(s, True) for s in SCOPES]
    assert loaded.warnings == (
        f"{scopes.path('project')}: model: a Claude Code setting teamctl does not implement "
        "(ignored)",
    )


def test_scalars_deep_merge_with_the_higher_scope_winning(scopes: Scopes) -> None:
    scopes.write("user", {"permissions": {"defaultMode": "acceptEdits"}})
    scopes.write("project", {"permissions": {"defaultMode": "plan"}})
    scopes.write("team", {"team": {"max_teammates": 3, "restart": "never"}})
    scopes.write("env", {"team": {"max_teammates": 5}})
    settings = scopes.load().settings
    assert settings.permissions.default_mode == "plan"
    assert (settings.team.max_teammates, settings.team.restart) == (5, "never")


def test_a_missing_home_or_repository_scope_is_skipped(scopes: Scopes) -> None:
    loaded = load_scoped_settings(scopes.path("team"), {})  # no HOME: no user scope
    assert [f.scope for f, _ in loaded.files] == ["project", "local", "team"]
    assert not any(exists for _, exists in loaded.files)
    assert loaded.settings == load_settings(scopes.path("team"), {})


REALISTIC_CLAUDE_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "env": {"BASH_DEFAULT_TIMEOUT_MS": "60000", "DISABLE_TELEMETRY": "1"},
    "includeCoAuthoredBy": False,
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh", "padding": 0},
    "enableAllProjectMcpServers": True,
    "enabledPlugins": {"formatter@anthropic-tools": True},
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)", "WebFetch(domain:docs.python.org)"],
        "deny": ["Read(./.env)", "Read(./secrets/**)", "Bash(curl:*)"],
        "ask": ["Bash(git push:*)"],
        "additionalDirectories": ["../docs/", "~/shared"],
        "defaultMode": "acceptEdits",
        "disableBypassPermissionsMode": "disable",
    },
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/guard.py",
                        "timeout": 10,
                        "if": "Bash(git *)",
                        "statusMessage": "checking the command",
                    }
                ],
            }
        ],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye", "async": True}]}],
        "Setup": [{"hooks": [{"type": "command", "command": "npm ci"}]}],
        "Stop": [{"hooks": [{"type": "prompt", "prompt": "Is the work done? $ARGUMENTS"}]}],
    },
    "sandbox": {"enabled": True, "autoAllowBashIfSandboxed": True},
}


def test_a_realistic_claude_code_settings_file_is_accepted(scopes: Scopes) -> None:
    path = scopes.write("project", REALISTIC_CLAUDE_SETTINGS)
    loaded = scopes.load()
    s = loaded.settings
    assert s.env["DISABLE_TELEMETRY"] == "1"
    assert s.permissions.default_mode == "acceptEdits"
    assert s.permissions.deny == ("Read(./.env)", "Read(./secrets/**)", "Bash(curl:*)")
    assert s.permissions.bypass_disabled
    assert s.permissions.additional_directories == (
        str((scopes.root / "../docs").resolve()),
        str(scopes.home / "shared"),
    )
    guard = s.hooks["PreToolUse"][0].hooks[0]
    assert (guard.if_rule, guard.timeout, guard.status_message) == (
        "Bash(git *)",
        10,
        "checking the command",
    )
    assert s.hooks["SessionEnd"][0].hooks[0].run_async is True
    assert s.hooks.get("Stop", ()) == ()  # a prompt hook is not run
    assert s.bash_sandbox.enabled == "auto"
    # one line each, naming the key and the file; nothing for $schema
    assert all("\n" not in w and w.startswith(f"{path}: ") for w in loaded.warnings)
    keys = [w.split(": ")[1] for w in loaded.warnings]
    assert keys == [
        "includeCoAuthoredBy",
        "statusLine",
        "enableAllProjectMcpServers",
        "enabledPlugins",
        "hooks.Setup",
        "hooks.Stop[0].hooks[0]",
        "sandbox.autoAllowBashIfSandboxed",
    ]
    # the merged settings survive the round trip the runtime makes
    HookSettings.parse(s.to_json()["hooks"])


def test_unknown_keys_in_claude_files_warn_but_misspelt_own_keys_error(scopes: Scopes) -> None:
    path = scopes.write(
        "local",
        {"someFutureKey": 1, "permissions": {"allowx": []}, "team": {"max_teammates": 2}},
    )
    loaded = scopes.load()
    assert loaded.settings.team.max_teammates == 2  # our own key, read from a Claude file
    assert loaded.warnings == (
        f"{path}: someFutureKey: not a setting teamctl or Claude Code knows (ignored)",
        f"{path}: permissions.allowx: not a setting teamctl or Claude Code knows (ignored)",
    )


@pytest.mark.parametrize("scope", ["team", "env"])
def test_a_misspelt_own_key_names_the_file_it_is_in(scopes: Scopes, scope: str) -> None:
    bad = scopes.write(scope, {"team": {"max_teamates": 3}})
    other = "env" if scope == "team" else "team"
    good = scopes.write(other, {"team": {"max_teammates": 2}})
    with pytest.raises(SettingsError) as info:
        scopes.load()
    message = str(info.value)
    assert f"settings {bad}" in message and "team.max_teamates" in message
    assert str(good) not in message
    assert ("from $TEAMCTL_SETTINGS" in message) is (scope == "env")


def test_a_claude_file_with_errors_is_skipped_with_a_warning_as_claude_code_does(
    scopes: Scopes,
) -> None:
    user = scopes.write("user", "{not json")
    local = scopes.write(
        "local", {"permissions": {"allow": ["Bash"], "deny": "Read(.env)"}, "env": {"A": "1"}}
    )
    scopes.write("team", {"permissions": {"ask": ["Bash(git push *)"]}})
    loaded = scopes.load()
    assert loaded.settings.permissions.allow == () and loaded.settings.env == {}
    assert [r.file.scope for r in loaded.rules] == ["team"]
    first, second = loaded.warnings
    assert first.startswith(f"{user}: skipped, ") and "not valid JSON" in first
    assert second.startswith(f"{local}: skipped, ") and "permissions.deny" in second
    scopes.write("team", "{not json")  # teamctl's own file: an error
    with pytest.raises(SettingsError, match="not valid JSON"):
        scopes.load()


def test_hook_events_and_handlers_claude_code_has(scopes: Scopes) -> None:
    path = scopes.write(
        "team",
        {
            "hooks": {
                "PostCompact": [{"hooks": [{"command": "x"}]}],
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [
                            {"type": "http", "url": "http://127.0.0.1:1/hook"},
                            {"command": "/bin/echo", "args": ["a b", "$HOME"], "once": True},
                        ],
                    }
                ],
            }
        },
    )
    loaded = scopes.load()
    (matcher,) = loaded.settings.hooks["PreToolUse"]
    assert [h.command for h in matcher.hooks] == ["/bin/echo 'a b' '$HOME'"]  # exec form
    assert "PostCompact" not in loaded.settings.hooks
    assert loaded.warnings == (
        f"{path}: hooks.PostCompact: a Claude Code hook event teamctl never fires (ignored)",
        f"{path}: hooks.PreToolUse[0].hooks[0]: 'http' hooks are not run by teamctl "
        "(only 'command' hooks)",
    )
    scopes.write("team", {"hooks": {"PreToolUze": []}})
    with pytest.raises(SettingsError, match="PreToolUze"):
        scopes.load()


def test_disable_bypass_permissions_mode(scopes: Scopes) -> None:
    project = scopes.write("project", {"permissions": {"disableBypassPermissionsMode": "disable"}})
    loaded = scopes.load()
    loaded.check_mode("acceptEdits")
    with pytest.raises(SettingsError) as info:
        loaded.check_mode("bypassPermissions")
    assert str(project) in str(info.value) and "\n" not in str(info.value)
    user = scopes.write("user", {"permissions": {"defaultMode": "bypassPermissions"}})
    with pytest.raises(SettingsError) as info:
        scopes.load()
    assert str(project) in str(info.value) and str(user) in str(info.value)
    # no scope can switch it back on
    scopes.write("team", {"permissions": {"disableBypassPermissionsMode": None}})
    with pytest.raises(SettingsError):
        scopes.load()


def test_claude_code_sandbox_block_maps_onto_bash_sandbox(scopes: Scopes) -> None:
    path = scopes.write(
        "project",
        {
            "sandbox": {
                "enabled": True,
                "failIfUnavailable": True,
                "filesystem": {"allowWrite": ["~/.cache", "//opt/out", "build"]},
                "network": {"allowedDomains": ["github.com"]},
                "excludedCommands": ["docker"],
            }
        },
    )
    loaded = scopes.load()
    assert loaded.settings.bash_sandbox == SandboxSettings(
        enabled=True,
        extra_writable=(
            str(scopes.home / ".cache"),
            "/opt/out",
            str((scopes.root / "build").resolve()),
        ),
    )
    assert [w.split(": ")[1] for w in loaded.warnings] == [
        "sandbox.network.allowedDomains",
        "sandbox.excludedCommands",
    ]
    # extra_writable concatenates across scopes; our own key wins over the mapped one
    scopes.write("team", {"bash_sandbox": {"enabled": False, "extra_writable": ["tmp"]}})
    sandbox = scopes.load().settings.bash_sandbox
    assert sandbox.enabled is False and sandbox.extra_writable[-1] == "tmp"
    assert len(sandbox.extra_writable) == 4
    assert path.exists()


def test_claude_sandbox_disabled_turns_ours_off(scopes: Scopes) -> None:
    scopes.write("user", {"sandbox": {"enabled": False}})
    assert scopes.load().settings.bash_sandbox.enabled is False


def test_teamctls_old_sandbox_key_is_read_as_bash_sandbox_with_a_warning(scopes: Scopes) -> None:
    path = scopes.write("team", {"sandbox": {"enabled": "auto", "network": True}})
    loaded = scopes.load()
    assert loaded.settings.bash_sandbox.network is True
    (warning,) = loaded.warnings
    assert warning.startswith(f"{path}: sandbox: ") and "bash_sandbox" in warning
    assert parse_settings({"sandbox": {"enabled": False}}, "t").bash_sandbox.enabled is False
    with pytest.raises(SettingsError, match=r"bash_sandbox\.enabeld"):
        parse_settings({"bash_sandbox": {"enabeld": True}}, "t")


def test_mcp_servers_and_env_merge_by_name(scopes: Scopes) -> None:
    scopes.write("user", {"mcpServers": {"a": {"command": "x", "args": ["1"]}}})
    scopes.write("team", {"mcpServers": {"a": {"type": "http", "url": "http://127.0.0.1:9"}}})
    server = scopes.load().settings.mcp_servers["a"]
    assert (server.type, server.url, server.args) == ("http", "http://127.0.0.1:9", ())
