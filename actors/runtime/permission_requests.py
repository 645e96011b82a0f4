"""Permission requests from teammates: routed, waited for, never a hang
(docs/ARCHITECTURE.md, "Protocols").

``PermissionRouter`` is the harness ``Approver`` of a teammate. When a rule says ``ask`` it
journals ``permission.requested`` and routes it by ``settings.approvals.permissions``:

- ``human``: nothing is sent; a person sees it in ``teamctl permissions`` and answers with
  ``teamctl approve|reject ID``;
- ``lead``: a ``permission_request`` message goes to the lead, who answers with its
  ``answer_permission`` tool;
- ``deny``: denied at once (journaled, so the record shows why).

It then blocks the teammate's tool call (the ``on_wait`` callback lets the actor show
``waiting_permission``) until ``permission.decided`` is observed or ``timeout_s`` passes; a
timeout journals a denial by ``timeout``. The journal decides races: the first decision wins, so
an answer arriving together with the timeout is either the decision or refused as too late.

The wait is event-driven: ``JournalDecisions`` wakes a ``threading.Event`` per request when a
``FileWatcher`` on the journal (or an in-process ``notify``) shows the decision.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from actors.board.protocols import (
    PermissionAnswer,
    decide_permission,
    new_permission_id,
    request_permission,
)
from actors.errors import TeamError
from harness.tools.base import PermissionRequest, ToolContext
from mailboxes.events import PermissionDecided, payload
from mailboxes.ports import EventStore

if TYPE_CHECKING:
    from actors.services import TeamServices
    from mailboxes.watch import FileWatcher

__all__ = [
    "JournalDecisions",
    "PermissionRefused",
    "PermissionRouter",
    "WaitForDecision",
]

LEAD = "lead"

WaitForDecision = Callable[[str, float], PermissionAnswer | None]
"""Block until request ``id`` is decided (its answer) or ``timeout`` seconds pass (``None``)."""

OnWait = Callable[[bool], None]
"""Told ``True`` when a teammate starts waiting for an answer, ``False`` when it stops."""


class PermissionRefused(TeamError):
    """A permission request that ended in a denial; the message says who refused and why."""


class JournalDecisions:
    """Waits for ``permission.decided`` events in the journal. Thread-safe; one watcher thread
    (started on the first wait) serves every waiter. ``close()`` stops it."""

    def __init__(self, store: EventStore, watch: Sequence[Path], *, rescan_s: float = 2.0) -> None:
        self._store = store
        self._watch_paths = tuple(watch)
        self._rescan_s = rescan_s
        self._lock = threading.Lock()
        self._cursor = 0
        self._decided: dict[str, PermissionAnswer] = {}
        self._waiters: dict[str, list[threading.Event]] = {}
        self._watcher: FileWatcher | None = None
        self._refusal: tuple[str, str] | None = None

    def wait(self, request_id: str, timeout_s: float) -> PermissionAnswer | None:
        """The decision on ``request_id``, or ``None`` after ``timeout_s`` without one (a denial
        at once after ``refuse_all``)."""
        woken = threading.Event()
        with self._lock:
            if self._refusal is not None:
                return PermissionAnswer(request_id, "deny", *self._refusal)
            self._waiters.setdefault(request_id, []).append(woken)
            if request_id in self._decided:
                woken.set()
        try:
            self._ensure_watching()
            self.scan()
            woken.wait(timeout_s)
            with self._lock:
                return self._decided.get(request_id)
        finally:
            with self._lock:
                left = [e for e in self._waiters.get(request_id, []) if e is not woken]
                if left:
                    self._waiters[request_id] = left
                else:
                    self._waiters.pop(request_id, None)

    def notify(self, answer: PermissionAnswer) -> None:
        """In-process fast path: wake waiters of ``answer`` without waiting for the watcher."""
        with self._lock:
            self._decided[answer.request_id] = answer
            for event in self._waiters.get(answer.request_id, []):
                event.set()

    def refuse_all(self, by: str, reason: str) -> None:
        """Answer every wait, current and future, with a denial by ``by`` (the host stops: no
        teammate may stay blocked on an answer nobody will give)."""
        with self._lock:
            self._refusal = (by, reason)
            waiting = list(self._waiters)
        for request_id in waiting:
            self.notify(PermissionAnswer(request_id, "deny", by, reason))

    def scan(self) -> None:
        """Read journal events appended since the last scan and wake decided waiters."""
        with self._lock:
            for event in self._store.read_from(self._cursor + 1):
                self._cursor = event.seq
                if event.type != "permission.decided":
                    continue
                body = payload(event)
                assert isinstance(body, PermissionDecided)
                answer = PermissionAnswer(body.request_id, body.decision, body.by, body.reason)
                self._decided[body.request_id] = answer
                for woken in self._waiters.get(body.request_id, []):
                    woken.set()

    def close(self) -> None:
        """Stop the watcher thread (idempotent)."""
        with self._lock:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    def _ensure_watching(self) -> None:
        from mailboxes.watch import FileWatcher

        with self._lock:
            if self._watcher is not None or not self._watch_paths:
                return
            watcher = FileWatcher(
                self._watch_paths, lambda _paths: self.scan(), rescan_s=self._rescan_s
            )
            self._watcher = watcher
        watcher.start()


def describe_request(request: PermissionRequest) -> dict[str, object]:
    """The ``input`` journaled for a request: what the call is about to touch."""
    return {
        "kind": request.kind,
        "target": request.target,
        "paths": list(request.paths),
        "destructive": request.destructive,
    }


class PermissionRouter:
    """A teammate's ``Approver``: journal, route, wait (bounded), answer. Raises
    ``PermissionRefused`` (the policy turns it into a denial carrying the message) on a denial
    or a timeout, so the model reads who refused and why."""

    def __init__(
        self,
        services: TeamServices,
        wait_for_decision: WaitForDecision,
        *,
        on_wait: OnWait | None = None,
        timeout_s: float | None = None,
        new_id: Callable[[], str] = new_permission_id,
    ) -> None:
        self._services = services
        self._wait = wait_for_decision
        self._on_wait = on_wait
        self._timeout_s = timeout_s
        self._new_id = new_id

    def __call__(self, request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        approvals = self._services.settings.approvals
        route = approvals.permissions
        timeout = self._timeout_s if self._timeout_s is not None else approvals.timeout_s
        board = self._services.board
        rid = self._new_id()
        request_permission(board, rid, ctx.agent, request.tool, describe_request(request), reason)
        if route == "deny":
            answer = decide_permission(
                board, rid, False, by="settings", reason="settings approvals.permissions is deny"
            )
            return _settle(answer, "settings")
        approver = "human" if route == "human" else LEAD
        if route == "lead":
            what = request.target or ", ".join(request.paths) or request.tool
            self._services.send(
                ctx.agent,
                LEAD,
                "permission_request",
                {
                    "text": (
                        f"{ctx.agent} asks to use {request.tool} on {what} ({reason}). Answer "
                        f"with answer_permission(request_id={rid!r}, allow, reason)."
                    ),
                    "request_id": rid,
                    "agent": ctx.agent,
                    "tool": request.tool,
                    "target": request.target,
                    "reason": reason,
                },
            )
        self._notify_wait(True)
        try:
            waited = self._wait(rid, timeout)
        finally:
            self._notify_wait(False)
        if waited is not None:
            return _settle(waited, approver)
        how = "`teamctl approve|reject`" if route == "human" else "answer_permission"
        answer = decide_permission(
            board,
            rid,
            False,
            by="timeout",
            reason=f"no answer from the {approver} ({how}) within {timeout:g}s",
        )
        return _settle(answer, approver)

    def _notify_wait(self, waiting: bool) -> None:
        if self._on_wait is not None:
            self._on_wait(waiting)


def _settle(answer: PermissionAnswer, approver: str) -> bool:
    if answer.allowed:
        return True
    who = answer.by if answer.by not in ("timeout", "settings") else approver
    why = f": {answer.reason}" if answer.reason else ""
    if answer.by == "timeout":
        raise PermissionRefused(f"permission request {answer.request_id} timed out{why}")
    raise PermissionRefused(f"permission request {answer.request_id} denied by {who}{why}")
