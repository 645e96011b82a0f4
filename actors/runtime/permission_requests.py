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
timeout journals a denial by ``timeout``.

A ``HumanDesk`` says how this runtime reaches a person (``teamctl run``'s console, or a headless
run). With one, the lead's own asks are routed to the human too, and an ask for the human is:
allowed at once when a rule remembered for the session (``always`` at the console) covers it;
refused at once, with a message naming the flag or setting that would allow it, when nobody is
there to answer (a headless run without ``--approvals human``: Claude Code's ``dontAsk``); or
shown (``HumanDesk.on_ask``, with its id) and waited for. The journal decides races: the first decision wins, so
an answer arriving together with the timeout is either the decision or refused as too late.

The wait is event-driven: ``JournalDecisions`` wakes a ``threading.Event`` per request when a
``Watcher``'s ``JournalAdvanced`` hint (or an in-process ``notify``) shows the decision.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from actors.board.protocols import (
    PermissionAnswer,
    decide_permission,
    new_permission_id,
    request_permission,
)
from actors.errors import TeamError
from harness.permissions.policy import ApprovalRefused
from harness.tools.base import PermissionRequest, ToolContext
from mailboxes.events import PermissionDecided, payload
from mailboxes.ports import EventStore

if TYPE_CHECKING:
    from actors.board.board import Board
    from actors.services import TeamServices
    from harness.settings import PermissionMode, PermissionSettings
    from mailboxes.ports import OnHints, Watcher

__all__ = [
    "HumanAsk",
    "HumanDesk",
    "JournalDecisions",
    "PermissionRefused",
    "PermissionRouter",
    "WaitForDecision",
    "WatchJournal",
    "allow_hint",
    "session_rule",
    "shown_target",
]

LEAD = "lead"

WaitForDecision = Callable[[str, float], PermissionAnswer | None]
"""Block until request ``id`` is decided (its answer) or ``timeout`` seconds pass (``None``)."""

WatchJournal = Callable[["OnHints", float], "Watcher"]
"""``(on_hints, rescan_s) -> Watcher`` of the journal (``Team.watch`` is one)."""

OnWait = Callable[[bool], None]
"""Told ``True`` when a teammate starts waiting for an answer, ``False`` when it stops."""


class PermissionRefused(TeamError, ApprovalRefused):
    """A permission request that ended in a denial; the message says who refused and why."""


class JournalDecisions:
    """Waits for ``permission.decided`` events in the journal. Thread-safe; one watcher thread
    (started on the first wait) serves every waiter. ``close()`` stops it."""

    def __init__(
        self, store: EventStore, watch: WatchJournal | None, *, rescan_s: float = 2.0
    ) -> None:
        self._store = store
        self._watch = watch
        self._rescan_s = rescan_s
        self._lock = threading.Lock()
        self._cursor = 0
        self._decided: dict[str, PermissionAnswer] = {}
        self._waiters: dict[str, list[threading.Event]] = {}
        self._watcher: Watcher | None = None
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
        with self._lock:
            if self._watcher is not None or self._watch is None:
                return
            watcher = self._watch(lambda _hints: self.scan(), self._rescan_s)
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


def shown_target(request: PermissionRequest, root: Path | None = None) -> str:
    """What the call touches, as rules write it (a path inside ``root`` relative to it)."""
    target = str(request.target or ", ".join(request.paths) or "")
    if root is not None and request.kind in ("read", "write") and Path(target).is_absolute():
        try:
            return Path(target).relative_to(root).as_posix()
        except ValueError:
            return target
    return target


def allow_hint(request: PermissionRequest, root: Path | None = None) -> str:
    """How to allow ``request`` without a person: the flag or the settings rule."""
    target = shown_target(request, root)
    if request.kind == "write":
        rule = f"Edit({target})" if target else "Edit"
        return (
            f"run with `--permission-mode acceptEdits`, or add {json.dumps(rule)} to "
            "permissions.allow in .team/settings.json"
        )
    if request.tool == "bash" and target.split():
        rule = f"Bash({target.split()[0]}:*)"
    else:
        rule = request.tool
    return (
        f"add {json.dumps(rule)} to permissions.allow in .team/settings.json (or run with "
        "`--permission-mode bypassPermissions`)"
    )


def session_rule(request: PermissionRequest) -> str:
    """The allow rule ``always`` remembers for the session: every write inside the root
    (``Edit``, as ``acceptEdits`` would), shell commands of the same program
    (``Bash(git:*)``), or the tool."""
    if request.kind == "write":
        return "Edit"
    words = (request.target or "").split()
    if request.tool == "bash" and words:
        return f"Bash({words[0]}:*)"
    return request.tool


@dataclass(frozen=True)
class HumanAsk:
    """An ask waiting for a person (or refused because nobody is there)."""

    request_id: str
    agent: str
    tool: str
    target: str
    reason: str
    hint: str
    """How to allow such a call without a person (a flag or a settings rule)."""
    rule: str
    """The session rule ``always`` would remember."""


class HumanDesk:
    """How a runtime reaches a person for the asks routed to the human. ``present``: someone
    answers (the console, or a headless run with ``--approvals human``), and ``on_ask`` shows
    each ask with its id; otherwise ``on_refused`` tells that an ask was refused at once.
    Rules remembered with ``remember`` (``always``) allow later asks they cover, for every
    member of the runtime, until it stops. Thread-safe."""

    def __init__(
        self,
        *,
        present: bool,
        permissions: PermissionSettings | None = None,
        mode: PermissionMode | None = None,
        on_ask: Callable[[HumanAsk], None] | None = None,
        on_refused: Callable[[HumanAsk], None] | None = None,
        absent_hint: str = "",
    ) -> None:
        from harness.settings import PermissionSettings

        self.present = present
        self.on_ask = on_ask
        self.on_refused = on_refused
        self.absent_hint = absent_hint
        """Said after the allow hint when nobody is there (e.g. how to wait for a person)."""
        self._permissions = permissions or PermissionSettings()
        self._mode: PermissionMode | None = mode
        self._lock = threading.Lock()
        self._rules: list[str] = []

    def remember(self, rule: str) -> None:
        """Allow, for the rest of the session, the asks ``rule`` covers."""
        from harness.permissions.rules import parse_rules

        parse_rules([rule])  # a bad rule is an error here, not at the next ask
        with self._lock:
            if rule not in self._rules:
                self._rules.append(rule)

    @property
    def rules(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._rules)

    def remembered(self, request: PermissionRequest, ctx: ToolContext) -> str | None:
        """The session rules (joined) when they allow ``request``, which the settings' rules
        alone do not; ``None`` otherwise. Deny and ask rules of the settings still win."""
        from harness.permissions.checks import Permissions

        rules = self.rules
        if not rules:
            return None
        perms = self._permissions
        mode = self._mode or perms.default_mode

        def check(allow: Sequence[str]) -> str:
            built = Permissions(
                allow=allow,
                ask=perms.ask,
                deny=perms.deny,
                mode=mode,
                extra_roots=perms.additional_directories,
            )
            return built.check(request, ctx).decision

        if check(perms.allow) == "allow" or check((*perms.allow, *rules)) != "allow":
            return None
        return ", ".join(rules)


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
        desk: HumanDesk | None = None,
        route: str | None = None,
    ) -> None:
        self._services = services
        self._wait = wait_for_decision
        self._on_wait = on_wait
        self._timeout_s = timeout_s
        self._new_id = new_id
        self._desk = desk
        self._route = route

    def __call__(self, request: PermissionRequest, ctx: ToolContext, reason: str) -> bool:
        approvals = self._services.settings.approvals
        route = self._route or approvals.permissions
        timeout = self._timeout_s if self._timeout_s is not None else approvals.timeout_s
        board = self._services.board
        rid = self._new_id()
        desk = self._desk
        if route == "human" and desk is not None:
            remembered = desk.remembered(request, ctx)
            if remembered is not None:  # asked and answered in one append: never shown pending
                why = f"allowed for this session by {remembered}"
                _decided_at_once(board, rid, ctx.agent, request, reason, True, "user", why)
                return True
            ask = HumanAsk(
                rid,
                ctx.agent,
                request.tool,
                shown_target(request, ctx.root),
                reason,
                allow_hint(request, ctx.root),
                session_rule(request),
            )
            if not desk.present:
                return self._nobody(ask, request, desk)
        request_permission(board, rid, ctx.agent, request.tool, describe_request(request), reason)
        if route == "human" and desk is not None and desk.on_ask is not None:
            desk.on_ask(ask)
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

    def _nobody(self, ask: HumanAsk, request: PermissionRequest, desk: HumanDesk) -> bool:
        """Nobody can answer: refuse at once, saying what would allow it (journaled)."""
        extra = f"; {desk.absent_hint}" if desk.absent_hint else ""
        why = f"nobody can approve it in this run: {ask.hint}{extra}"
        board = self._services.board
        _decided_at_once(
            board, ask.request_id, ask.agent, request, ask.reason, False, "runtime", why
        )
        if desk.on_refused is not None:
            desk.on_refused(replace(ask, hint=ask.hint + extra))
        raise PermissionRefused(f"permission request {ask.request_id} refused: {why}")

    def _notify_wait(self, waiting: bool) -> None:
        if self._on_wait is not None:
            self._on_wait(waiting)


def _decided_at_once(
    board: Board,
    rid: str,
    agent: str,
    request: PermissionRequest,
    reason: str,
    allow: bool,
    by: str,
    why: str,
) -> None:
    """Journal ``permission.requested`` and its ``permission.decided`` in one append (with the
    op ids of ``actors.board.protocols``), so nobody ever sees the request pending."""
    from mailboxes.events import PermissionRequested, draft

    asked = PermissionRequested(
        request_id=rid,
        agent=agent,
        tool=request.tool,
        input=describe_request(request),
        reason=reason,
    )
    decided = PermissionDecided(
        request_id=rid, decision="allow" if allow else "deny", by=by, reason=why
    )
    board.execute(
        lambda _state: [
            draft(asked.TYPE, agent, asked, f"permission.requested:{rid}"),
            draft(decided.TYPE, by, decided, f"permission.decided:{rid}"),
        ]
    )


def _settle(answer: PermissionAnswer, approver: str) -> bool:
    if answer.allowed:
        return True
    who = answer.by if answer.by not in ("timeout", "settings") else approver
    why = f": {answer.reason}" if answer.reason else ""
    if answer.by == "timeout":
        raise PermissionRefused(f"permission request {answer.request_id} timed out{why}")
    raise PermissionRefused(f"permission request {answer.request_id} denied by {who}{why}")
