"""Running a task's ``verify`` command (docs/ARCHITECTURE.md, "Verified tasks").

The command runs as the foreground ``bash`` tool runs one (``harness.tools.bash.run_command``):
``/bin/bash -c`` in its own process group, stdin ``/dev/null``, the agent's scrubbed command
environment (``harness.shell.environment``), under the team's bash sandbox when it can run
(``harness.shell.sandbox``), killed at the timeout. Its output is capped for the model and the
journal. A sandbox that is required but cannot run fails the check (it never runs unsandboxed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from actors.settings import Settings
from harness.shell.environment import CommandEnv
from harness.shell.sandbox import Sandbox, SandboxUnavailable
from harness.tools.bash import run_command
from mailboxes.events import TaskVerified

log = logging.getLogger(__name__)

OUTPUT_HEAD_BYTES = 3_000
OUTPUT_TAIL_BYTES = 3_000
"""How much of the command's output is kept (head and tail): what the model and journal see."""
VERIFY_TIMEOUT_S = 600.0
"""The default of ``team.verify_timeout_s``."""


@dataclass(frozen=True)
class VerifyOutcome:
    """How one run of a ``verify`` command ended."""

    command: str
    exit_code: int | None
    """None: it timed out or could not start."""
    timed_out: bool
    output: str
    """Merged stdout and stderr, capped (head and tail)."""
    timeout_s: float

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def status(self) -> str:
        """One phrase: how it ended."""
        if self.timed_out:
            return f"timed out after {self.timeout_s:g} s"
        if self.exit_code is None:
            return "could not run"
        if self.exit_code < 0:
            return f"was killed by signal {-self.exit_code}"
        return f"exited {self.exit_code}"

    def report(self) -> str:
        """The command, how it ended and its output: what a refusal shows."""
        output = self.output.rstrip("\n") or "(no output)"
        return f"verify command `{self.command}` {self.status()}:\n{output}"

    def event(
        self,
        task_id: str,
        stage: Literal["complete", "merge"],
        *,
        worktree: str | None = None,
        commit: str | None = None,
    ) -> TaskVerified:
        """The ``task.verified`` body recording this run."""
        return TaskVerified(
            task_id=task_id,
            command=self.command,
            stage=stage,
            passed=self.passed,
            exit_code=self.exit_code,
            timed_out=self.timed_out,
            output=self.output,
            worktree=worktree,
            commit=commit,
        )


@dataclass(frozen=True)
class Verifier:
    """How ``verify`` commands run: the sandbox (None: unsandboxed), the command environment
    (None: this process's, without the model credentials) and the timeout."""

    sandbox: Sandbox | None = None
    env: CommandEnv | None = None
    timeout_s: float = VERIFY_TIMEOUT_S

    @classmethod
    def from_settings(cls, settings: Settings) -> Verifier:
        """The team's: its bash sandbox, ``env``/``command_env`` and ``team.verify_timeout_s``."""
        return cls(
            Sandbox(settings.bash_sandbox), settings.child_env(), settings.team.verify_timeout_s
        )

    def run(
        self,
        command: str,
        *,
        cwd: Path,
        sandbox: Sandbox | None = None,
        env: Mapping[str, str] | None = None,
    ) -> VerifyOutcome:
        """Run ``command`` in ``cwd`` (also the sandbox's writable root); ``sandbox`` and ``env``
        override this verifier's (an agent's own, from its tool context)."""
        box = sandbox or self.sandbox
        wrapper: list[str] = []
        if box is not None:
            try:
                wrapper, notice = box.prefix(root=cwd, cwd=cwd)
            except SandboxUnavailable as exc:
                return VerifyOutcome(command, None, False, str(exc), self.timeout_s)
            if notice:
                log.warning("verify: %s", notice)
        if env is None and self.env is not None:
            env = self.env.environment()
        result = run_command(
            command,
            cwd=cwd,
            timeout_s=self.timeout_s,
            outputs_dir=None,
            head_bytes=OUTPUT_HEAD_BYTES,
            tail_bytes=OUTPUT_TAIL_BYTES,
            wrapper=wrapper,
            env=env,
        )
        code = None if result.timed_out else result.exit_code
        return VerifyOutcome(
            command, code, result.timed_out, result.output.render(), self.timeout_s
        )
