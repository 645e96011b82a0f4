"""The environment of every process started for an agent: shell commands, background jobs, hook
commands and MCP stdio servers (docs/ARCHITECTURE.md, "Environment of child processes").

``CommandEnv.environment()`` is the one function that builds it: this process's environment,
minus the model credentials and every variable the settings mark secret (unless the settings
pass it on), plus the settings' ``env`` (Claude Code's ``env`` key: variables set for commands
and hooks). The processes that need the key keep it: this process's own environment is never
changed, so the model client and the team members (``teamctl run``, ``teamctl join``) read
``ANTHROPIC_API_KEY`` as before.

Settings (``command_env`` in ``.team/settings.json``)::

    "env": {"PIP_INDEX_URL": "https://pypi.example/simple"},
    "command_env": {"secret": ["GITHUB_TOKEN", "*_SECRET"], "pass": ["ANTHROPIC_BASE_URL"]}

``secret`` and ``pass`` are variable names or ``fnmatch`` patterns (case-sensitive). A variable
is removed when it is a model credential (``MODEL_CREDENTIALS``) or matches ``secret``, unless it
matches ``pass``. A variable named in ``env`` is always set to that value: the settings file says
so explicitly.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, Field

from teamctl_base.models import Frozen

__all__ = [
    "COMMAND_ENV_KEY",
    "MODEL_CREDENTIALS",
    "CommandEnv",
    "CommandEnvSettings",
    "child_environment",
]

COMMAND_ENV_KEY = "command_env"
"""``ToolContext.extra`` key of the agent's ``CommandEnv`` (subagents inherit ``extra``)."""

MODEL_CREDENTIALS: tuple[str, ...] = (
    # The anthropic SDK's credentials (its client, Bedrock, Foundry, Vertex workload identity,
    # webhooks) and Claude Code's own OAuth token. ANTHROPIC_CUSTOM_HEADERS often carries an
    # Authorization header for a gateway.
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_AWS_API_KEY",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_ENVIRONMENT_KEY",
    "ANTHROPIC_FOUNDRY_API_KEY",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_WEBHOOK_SIGNING_KEY",
    "ANTHROPIC_WORK_SECRET",
    "AWS_BEARER_TOKEN_BEDROCK",
    "CLAUDE_CODE_OAUTH_TOKEN",
)
"""Removed from every child environment unless ``command_env.pass`` names them."""


class CommandEnvSettings(Frozen):
    """The ``command_env`` settings section: which variables commands, jobs, hooks and MCP
    servers do not get (``secret``) and which credentials they do get after all (``pass``)."""

    model_config = ConfigDict(**Frozen.model_config, populate_by_name=True)

    secret: tuple[str, ...] = ()
    """Variables (names or ``fnmatch`` patterns) removed from the environment of commands,
    background jobs, hooks and MCP servers, on top of the model credentials."""
    pass_on: tuple[str, ...] = Field(default=(), alias="pass")
    """Variables (names or patterns) passed on even though they are model credentials or match
    ``secret``."""


@dataclass(frozen=True)
class CommandEnv:
    """What child processes of an agent get: ``env`` set, credentials and secrets removed."""

    env: Mapping[str, str] = field(default_factory=dict)
    secret: tuple[str, ...] = ()
    pass_on: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls, env: Mapping[str, str] | None = None, section: CommandEnvSettings | None = None
    ) -> CommandEnv:
        """From the settings' ``env`` and ``command_env`` values."""
        section = section or CommandEnvSettings()
        return cls(dict(env or {}), section.secret, section.pass_on)

    def is_secret(self, name: str) -> bool:
        """True when ``name`` is kept from child processes."""
        if _matches(name, self.pass_on):
            return False
        return name in MODEL_CREDENTIALS or _matches(name, self.secret)

    def environment(
        self, base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """``base`` (default: this process's environment) without the secret variables, then the
        settings' ``env``, then ``extra`` (what the caller adds: a job marker, a server's own
        ``env``), which is set as given."""
        source = os.environ if base is None else base
        out = {k: v for k, v in source.items() if not self.is_secret(k)}
        out.update(self.env)
        if extra:
            out.update(extra)
        return out


def child_environment(
    command_env: CommandEnv | None = None,
    *,
    base: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``command_env.environment(base, extra)``; without settings, the model credentials are
    still removed."""
    return (command_env or CommandEnv()).environment(base, extra)


def command_env_of(extra: Mapping[str, Any]) -> CommandEnv:
    """The ``CommandEnv`` a ``ToolContext.extra`` holds (the default one if none)."""
    found = extra.get(COMMAND_ENV_KEY)
    return found if isinstance(found, CommandEnv) else CommandEnv()


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)
