"""``Supervisor``: learns of every agent failure and applies the restart policy (DESIGN §7).

pykka has no supervision, so agent actors never let an exception escape; they report failures to
the runtime, which tells this actor. For each failure of a live incarnation the Supervisor asks
the runtime to record the crash (``member.status_changed(status="crashed")``, the claim released,
an ``error`` message to the lead, the actor stopped), then restarts the agent from its transcript
when ``settings.team.restart`` is ``on-crash`` and the member has restarts left.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

import pykka

from actors.messages import AgentFailed

log = logging.getLogger(__name__)

__all__ = ["Supervised", "Supervisor"]


class Supervised(Protocol):
    """What the Supervisor asks of the runtime."""

    def record_crash(self, name: str, error: str, generation: int) -> bool:
        """Record the crash of incarnation ``generation``; False if it is stale (already
        handled, or the member was stopped meanwhile)."""
        ...

    def restart(self, name: str) -> None:
        """Bring the member back from its transcript (raises on failure)."""
        ...

    def supervising(self, name: str, busy: bool) -> None:
        """Whether a failure of ``name`` is being handled (the team is not idle meanwhile)."""
        ...


class Supervisor(pykka.ThreadingActor):
    """Handles ``AgentFailed`` messages one at a time."""

    def __init__(
        self,
        runtime: Supervised,
        *,
        policy: Literal["never", "on-crash"] = "on-crash",
        max_restarts: int = 3,
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.policy = policy
        self.max_restarts = max_restarts
        self.restarts: dict[str, int] = {}
        self.crashes: list[tuple[str, str]] = []

    def on_receive(self, message: Any) -> Any:
        try:
            match message:
                case AgentFailed(name=name, error=error, generation=generation):
                    return self._failed(name, error, generation)
                case _:
                    log.warning("supervisor ignores %r", message)
        except BaseException:  # the supervisor itself must survive
            log.exception("supervisor failed handling %r", message)
        return None

    def _failed(self, name: str, error: str, generation: int) -> bool:
        """Returns True when the member was restarted."""
        try:
            if not self.runtime.record_crash(name, error, generation):
                return False
            self.crashes.append((name, error))
            used = self.restarts.get(name, 0)
            if self.policy != "on-crash" or used >= self.max_restarts:
                log.warning("%s crashed and stays down (%d restarts used)", name, used)
                return False
            self.restarts[name] = used + 1
            try:
                self.runtime.restart(name)
            except Exception:
                log.exception("restarting %s failed", name)
                return False
            return True
        finally:
            self.runtime.supervising(name, False)
