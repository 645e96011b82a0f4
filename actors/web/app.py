"""The dashboard's ASGI application: routes, the live event stream and the static page.

Routes (README.md, "Web dashboard"): ``GET /`` (the page), ``/static/…`` (its assets),
``GET /api/state``, ``GET /api/tasks/{id}``, ``GET /api/events`` (server-sent events),
``GET /api/transcripts/{agent}``, ``GET /api/jobs/{id}/output``, ``POST /api/approvals/{id}``,
``POST /api/messages``. Every request passes ``actors.web.auth.TokenGate`` first.

Live updates: one ``Team.watch`` watcher (the journal, the inboxes, a rescan tick) wakes the
open event streams; each stream then reads the journal from where it is. There is no polling
loop: without a change nothing runs but the heartbeat comments.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from actors.web.auth import Access, TokenGate
from actors.web.state import Dashboard, NotFound

if TYPE_CHECKING:
    from mailboxes.ports import Hint, Watcher

STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 1 << 20
"""The largest request body a POST may carry."""
MAX_MESSAGE = 100_000
"""The longest message text ``POST /api/messages`` sends."""
HEARTBEAT_S = 15
FAREWELL_S = 1.0
"""How long an event stream has to end by itself when the server stops (less than the server's
graceful shutdown, ``actors/web/server.py`` ``GRACEFUL_S``)."""
PLACEHOLDER = (
    "<!doctype html><meta charset=utf-8><title>teamctl</title>"
    "<p>teamctl web: the dashboard page is not installed; the JSON API is at /api/state.</p>"
)


class Wakeups:
    """Wakes the open event streams when the watcher reports a change (any thread)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._streams: set[Stream] = set()

    def hints(self, hints: frozenset[Hint]) -> None:
        """The watcher's callback (its own thread)."""
        from mailboxes.ports import InboxChanged

        agents = frozenset(h.agent for h in hints if isinstance(h, InboxChanged))
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._wake, agents)

    def _wake(self, agents: frozenset[str]) -> None:
        for stream in list(self._streams):
            stream.inboxes |= agents
            stream.event.set()

    def open(self) -> Stream:
        stream = Stream()
        self._streams.add(stream)
        return stream

    def close(self, stream: Stream) -> None:
        self._streams.discard(stream)


class Stream:
    """One open ``/api/events`` connection: woken, and which inboxes changed meanwhile."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.inboxes: frozenset[str] = frozenset()
        self.closing = False

    def set(self) -> None:
        """The server stops (sse-starlette's ``shutdown_event`` protocol): end the stream
        normally, so its response completes instead of being cut."""
        self.closing = True
        self.event.set()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    body = await request.body()
    if len(body) > MAX_BODY:
        raise ValueError("request body too large")
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        raise ValueError("the body is not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("the body is not a JSON object")
    return value


def build_app(
    dashboard: Dashboard,
    access: Access,
    *,
    watch: Callable[[Callable[[frozenset[Hint]], None]], Watcher] | None = None,
) -> TokenGate:
    """The application for ``dashboard`` behind the token gate. ``watch`` makes the watcher
    that feeds the event streams (default: ``Team.watch`` of the dashboard's team)."""
    wakeups = Wakeups()
    make_watcher = watch or (lambda on_hints: dashboard.team.watch(on_hints))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        wakeups.loop = asyncio.get_running_loop()
        watcher = make_watcher(wakeups.hints)
        watcher.start()
        try:
            yield
        finally:
            wakeups.loop = None
            await run_in_threadpool(watcher.stop)

    async def index(request: Request) -> Response:
        page = STATIC / "index.html"
        if page.is_file():
            return FileResponse(page, media_type="text/html; charset=utf-8")
        return Response(PLACEHOLDER, media_type="text/html; charset=utf-8")

    async def state(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(dashboard.state, access.csrf))

    async def task(request: Request) -> Response:
        try:
            body = await run_in_threadpool(dashboard.task, request.path_params["task_id"])
        except NotFound:
            return _error(404, "no such task")
        return JSONResponse(body)

    async def transcript(request: Request) -> Response:
        try:
            body = await run_in_threadpool(dashboard.transcript, request.path_params["agent"])
        except NotFound:
            return _error(404, "no such member")
        return JSONResponse(body)

    async def job_output(request: Request) -> Response:
        try:
            body = await run_in_threadpool(dashboard.job_output, request.path_params["job_id"])
        except NotFound:
            return _error(404, "no such job")
        return JSONResponse(body)

    async def events(request: Request) -> Response:
        from sse_starlette.sse import EventSourceResponse

        after = _resume_point(request)
        if after is None:
            after = await run_in_threadpool(dashboard.last_seq)
        elif after == -1:
            return _error(400, "Last-Event-ID and after must be a journal seq")
        stream = wakeups.open()

        async def produce() -> AsyncIterator[dict[str, Any]]:
            seq = after
            try:
                while not stream.closing:
                    stream.event.clear()
                    inboxes, stream.inboxes = stream.inboxes, frozenset()
                    while True:
                        batch = await run_in_threadpool(dashboard.events_after, seq)
                        for item in batch:
                            seq = item["seq"]
                            yield {"id": str(seq), "event": "journal", "data": _dumps(item)}
                        if not batch:
                            break
                    if inboxes:
                        yield {"event": "inbox", "data": _dumps({"agents": sorted(inboxes)})}
                    await stream.event.wait()
            finally:
                wakeups.close(stream)

        return EventSourceResponse(
            produce(),
            ping=HEARTBEAT_S,
            send_timeout=30,
            shutdown_event=cast(Any, stream),
            shutdown_grace_period=FAREWELL_S,
        )

    async def approval(request: Request) -> Response:
        try:
            body = await _json_body(request)
            decision = body.get("decision")
            feedback = body.get("feedback", "")
            if decision not in ("approve", "reject") or not isinstance(feedback, str):
                raise ValueError('expected {"decision": "approve"|"reject", "feedback": "..."}')
        except ValueError as exc:
            return _error(400, str(exc))
        request_id = request.path_params["request_id"]
        return await run_in_threadpool(
            _answer, dashboard, request_id, decision == "approve", feedback
        )

    async def message(request: Request) -> Response:
        try:
            body = await _json_body(request)
            to, text = body.get("to"), body.get("body")
            if not isinstance(to, str) or not isinstance(text, str) or not text.strip():
                raise ValueError('expected {"to": MEMBER, "body": TEXT}')
            if len(text) > MAX_MESSAGE:
                raise ValueError(f"a message is at most {MAX_MESSAGE} characters")
        except ValueError as exc:
            return _error(400, str(exc))
        return await run_in_threadpool(_send, dashboard, to, text)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/api/state", state, methods=["GET"]),
        Route("/api/tasks/{task_id}", task, methods=["GET"]),
        Route("/api/events", events, methods=["GET"]),
        Route("/api/transcripts/{agent}", transcript, methods=["GET"]),
        Route("/api/jobs/{job_id}/output", job_output, methods=["GET"]),
        Route("/api/approvals/{request_id}", approval, methods=["POST"]),
        Route("/api/messages", message, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
    ]
    return TokenGate(Starlette(routes=routes, lifespan=lifespan), access)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _resume_point(request: Request) -> int | None:
    """Where a stream starts: after ``Last-Event-ID`` (a reconnecting EventSource) or
    ``?after=SEQ``; None: after the journal's current end; -1: not a seq."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    if raw is None or raw == "":
        return None
    try:
        seq = int(raw)
    except ValueError:
        return -1
    return seq if seq >= 0 else -1


def _answer(dashboard: Dashboard, request_id: str, approve: bool, feedback: str) -> Response:
    """``POST /api/approvals/{id}``: the protocol of ``teamctl approve|reject``, as the human."""
    from actors.errors import TeamError
    from actors.factory import open_team
    from actors.protocols import answer_request
    from mailboxes.errors import MailboxesError

    try:
        with open_team(dashboard.root, actor="cli") as team:
            result = answer_request(team, request_id, approve, feedback, dashboard.human)
    except (TeamError, MailboxesError) as exc:
        return _error(409, str(exc))
    result.pop("line", None)
    result["by"] = dashboard.human
    return JSONResponse(result)


def _send(dashboard: Dashboard, to: str, text: str) -> Response:
    """``POST /api/messages``: what ``teamctl send TO TEXT`` does, from the human."""
    from actors.factory import open_team
    from mailboxes.messages import MessageDraft

    if to not in dashboard.members():
        return _error(404, "no such member")
    with open_team(dashboard.root, actor="cli") as team:
        delivered = team.mailbox.deliver(
            dashboard.human, MessageDraft(to=to, type="message", body={"text": text})
        )
    return JSONResponse({"sent": [{"id": e.id, "to": e.to} for e in delivered]})
