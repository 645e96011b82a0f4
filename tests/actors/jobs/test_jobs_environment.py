"""Background jobs run without the model credentials, with the settings' ``env``, and write
their logs with mode 0600."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from actors.jobs.proc import MARKER
from harness.shell.environment import CommandEnv
from tests.actors.jobs.test_jobs import Env, env, stop_actors

__all__ = ["env", "stop_actors"]

KEY = "sk-ant-job-secret"


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("DEPLOY_TOKEN", "deploy-token-value")


def job_output(env: Env, **kwargs: object) -> tuple[str, Path]:
    jobs = env.start(**kwargs)
    view = jobs.start_job("env", cwd=env.root, owner="alice")
    env.wait_for_message("alice")
    log = env.jobs_dir / f"{view.job_id}.log"
    return log.read_text(), log


def test_a_background_job_does_not_see_the_key_and_its_log_is_private(env: Env) -> None:
    text, log = job_output(env)
    assert KEY not in text and "ANTHROPIC_API_KEY" not in text
    assert "DEPLOY_TOKEN=deploy-token-value" in text
    assert f"{MARKER}=" in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_job_gets_the_settings_env_secrets_and_passed_on_variables(env: Env) -> None:
    policy = CommandEnv(
        env={"FROM_SETTINGS": "yes"}, secret=("DEPLOY_*",), pass_on=("ANTHROPIC_API_KEY",)
    )
    text, _ = job_output(env, command_env=policy)
    assert f"ANTHROPIC_API_KEY={KEY}" in text
    assert "FROM_SETTINGS=yes" in text
    assert "deploy-token-value" not in text
