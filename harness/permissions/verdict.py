"""A permission decision and why: ``Verdict`` (allow, ask or deny, with its source) and
``strictest`` (deny > ask > allow), shared by the tool-call checks and the shell-command checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Decision = Literal["allow", "ask", "deny"]
Source = Literal["rule", "default", "mode", "path", "analysis", "hook"]
_RANK: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class Verdict:
    """One decision and why. ``source`` says what produced it (a hook's allow may only replace an
    ``ask`` whose source is ``default``, or ``analysis`` when no shell deny rule exists)."""

    decision: Decision
    reason: str
    source: Source = "default"
    rule: str | None = None

    def stricter(self, other: Verdict) -> Verdict:
        return other if _RANK[other.decision] > _RANK[self.decision] else self


ALLOW = Verdict("allow", "allowed")


def strictest(verdicts: Iterable[Verdict]) -> Verdict:
    """The strictest verdict (the first one of that strictness)."""
    best = ALLOW
    for v in verdicts:
        best = best.stricter(v)
    return best
