"""The bash sandbox reaches the agents of a team and of ``teamctl ask``: under bubblewrap a command
cannot write outside the agent's root (nor into ``.team``); with the sandbox off in the settings it
can (so the tests show the setting is what stops it)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.cli.ask import default_policy_factory
from harness.headless import EXIT_OK, run_ask
from harness.model.scripted import ScriptedModel
from tests.actors.runtime.runtime_support import runtime, stop_actors, team_repo

__all__ = ["stop_actors"]

pytestmark = pytest.mark.sandbox


def escape(outside: Path) -> str:
    """Writes the permission rules cannot see (code run by Python): one outside the root, one
    into ``.team``, then one inside the root."""
    return (
        f"{sys.executable} -c \"open('{outside}/escaped', 'w')\"; "
        f"{sys.executable} -c \"open('.team/planted', 'w')\"; "
        "echo y > inside"
    )


def script(agent: str, command: str) -> dict[str, Any]:
    return {
        "agents": {
            agent: {
                "steps": [
                    {"tool_uses": [{"name": "bash", "input": {"command": command}}]},
                    {"text": "done"},
                ]
            }
        }
    }


def set_sandbox(root: Path, enabled: Any) -> None:
    path = root / ".team" / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings["sandbox"] = {"enabled": enabled}
    path.write_text(json.dumps(settings))


@pytest.mark.parametrize("enabled", ["auto", False])
def test_team_agents_run_bash_in_the_sandbox(
    tmp_path: Path, stop_actors: list[Any], enabled: Any
) -> None:
    root, outside = team_repo(tmp_path), tmp_path / "outside"
    outside.mkdir()
    set_sandbox(root, enabled)
    model = ScriptedModel(script("lead", escape(outside)))
    rt = runtime(root, model, permission_mode="bypassPermissions")
    stop_actors.append(rt)
    rt.start()
    rt.submit("go")
    assert rt.wait_idle(timeout=60)
    model.assert_consumed()
    assert (root / "inside").read_text() == "y\n"
    assert (outside / "escaped").exists() is (enabled is False)
    assert (root / ".team" / "planted").exists() is (enabled is False)


@pytest.mark.parametrize("enabled", [None, False])
def test_ask_runs_bash_in_the_sandbox(tmp_path: Path, enabled: Any) -> None:
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / ".team").mkdir(parents=True)
    outside.mkdir()
    if enabled is not None:
        set_sandbox(root, enabled)
    model = ScriptedModel(script("ask", escape(outside)))
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        root,
        "go",
        model_client=model,
        permission_mode="bypassPermissions",
        policy_factory=default_policy_factory,
        out=out,
        err=err,
    )
    assert code == EXIT_OK, err.getvalue()
    model.assert_consumed()
    assert (root / "inside").read_text() == "y\n"
    assert (outside / "escaped").exists() is (enabled is False)
    assert (root / ".team" / "planted").exists() is (enabled is False)
