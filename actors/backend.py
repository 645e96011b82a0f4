"""Which backend a team lives on (docs/ARCHITECTURE.md, "Backends and seams"), read without the
settings models: opening a team on files, what nearly every command does, then imports no
pydantic settings (docs/ARCHITECTURE.md, "Start-up and benchmarks"). ``actors.settings``
re-exports these names and turns a bad value into a ``SettingsError`` (``team_backend``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BACKEND_ENV", "NatsBackend", "backend_setting", "on_files", "parse_backend"]

BACKEND_ENV = "TEAMCTL_BACKEND"
"""Overrides the ``backend`` of ``.team/settings.json`` (docs/ARCHITECTURE.md, "Backends and
seams")."""

_NATS_BACKEND = re.compile(r"^nats://([^/]+)/([A-Za-z0-9_-]{1,64})$")
_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:.]+\]:[0-9]{1,5}$")


@dataclass(frozen=True)
class NatsBackend:
    """``nats://HOST:PORT[,HOST:PORT…]/TEAM``: the journal and liveness of team ``team`` on the
    JetStream servers ``servers`` (``nats://HOST:PORT`` each)."""

    servers: tuple[str, ...]
    team: str


def parse_backend(value: str) -> NatsBackend | None:
    """``"file"``: None (the ``.team/`` files); a ``nats://`` value: a ``NatsBackend``; anything
    else: ``ValueError`` saying what is accepted."""
    if value == "file":
        return None
    match = _NATS_BACKEND.match(value)
    hosts = match.group(1).split(",") if match else []
    if not match or not all(_HOST_PORT.match(h) for h in hosts):
        raise ValueError(
            f'{value!r} is not a backend: use "file" or nats://HOST:PORT[,HOST:PORT...]/TEAM '
            "(TEAM: 1-64 of A-Z a-z 0-9 _ -)"
        )
    return NatsBackend(servers=tuple(f"nats://{h}" for h in hosts), team=match.group(2))


def backend_setting(path: Path, environ: Mapping[str, str] | None = None) -> tuple[object, str]:
    """The backend value and where it came from: ``$TEAMCTL_BACKEND`` when set, else the
    top-level ``backend`` of ``path`` (``.team/settings.json``), else ``"file"``. Reads only that
    key; a settings file that is not JSON counts as ``"file"`` here (the commands that load
    settings report it). The value is not checked (``parse_backend``)."""
    import json

    env = os.environ if environ is None else environ
    value: object = env.get(BACKEND_ENV) or None
    if value is not None:
        return value, f"${BACKEND_ENV}"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    return (raw.get("backend", "file") if isinstance(raw, dict) else "file"), (
        f"settings {path}: backend"
    )


def on_files(path: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the team of settings file ``path`` is on files (the default): its backend value
    is ``"file"``. False for any other value, good or bad (``team_backend`` says which)."""
    return backend_setting(path, environ)[0] == "file"
