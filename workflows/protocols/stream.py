"""The live stream of an invocation (DESIGN 4.5, "Live stream"), as Server-Sent Events.

One SSE event per session event (`event: session`, `id:` the event's id) and, right after
a session event that records a node run's outcome, one for that node run's status change
(`event: node_run`, `id: <event id>.1`); so a position names everything sent up to it,
and `Last-Event-ID` resumes with nothing lost or repeated. A node run's start is a state,
not a session event: `event: node_run` with status RUNNING and no `id:`, sent once per
connection for each attempt seen running (a resumed connection tells what runs now). The
stream ends with `event: end` (no id: nothing follows it) once the invocation is final. A
comment line every HITL["STREAM_KEEPALIVE_SECONDS"] keeps proxies from closing a quiet
connection.

Questions are shown through the envelope to those who may answer them, and withheld (id,
kind, "waiting on others") from anyone else who may see the invocation.

Under ASGI `async_messages` holds no thread while it waits: PostgreSQL's LISTEN
(wakeup.py) or a poll wakes it, and each read runs briefly in the shared thread pool.
Under WSGI `messages` is the same loop in the request's thread, polling.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections, connections
from django.http import StreamingHttpResponse

from workflows.conf import hitl_settings
from workflows.engine.status import NodeStatus
from workflows.models import ANSWERED_STATUSES, Interrupt, Invocation, NodeRun, SessionEvent

from . import wakeup
from .visibility import questions, shown

BATCH = 500  # session events read at once
RETRY_MILLISECONDS = 2000  # how soon a browser's EventSource reconnects
KEEP_ALIVE = ": keep-alive\n\n"
POSITION = re.compile(r"(\d{1,18})(\.1)?")


class InvalidPositionError(ValueError):
    code = "invalid_last_event_id"


class StreamCapacityError(Exception):
    code = "stream_capacity"


@dataclass(frozen=True, order=True)
class Position:
    """Where a client is: after session event `event_id`, and after the node-run status
    change it records too when `change_sent`. Position(0) is the start."""

    event_id: int = 0
    change_sent: bool = False

    def __str__(self) -> str:
        return f"{self.event_id}.1" if self.change_sent else str(self.event_id)


def parse_position(text: str | None) -> Position:
    """A `Last-Event-ID` as this stream sent it ("42" or "42.1"); none: the start."""
    if text is None or text == "":
        return Position()
    match = POSITION.fullmatch(text.strip())
    if match is None:
        raise InvalidPositionError(
            f"Last-Event-ID {text[:64]!r} is not an id this stream sent (like 42 or 42.1)"
        )
    return Position(int(match[1]), bool(match[2]))


def sse(data: Any, event: str, position: Position | str | None = None) -> str:
    """One SSE event; its data is one line of JSON; `position` its id."""
    head = f"id: {position}\n" if position is not None else ""
    body = json.dumps(data, cls=DjangoJSONEncoder, separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n"


@dataclass
class Batch:
    """What a read found after a position: the session events (at most BATCH), the
    position after them, and the invocation as it was before they were read."""

    events: list[SessionEvent] = field(default_factory=list)
    position: Position = Position()
    status: NodeStatus = NodeStatus.PENDING
    output: Any = None
    error: str = ""
    running: list[NodeRun] = field(default_factory=list)  # node runs started, not ended
    more: bool = False  # a full batch: read again at once
    stopped: bool = False  # final, or waiting on questions with no answer to apply

    @property
    def final(self) -> bool:
        return self.status.is_final and not self.more


def event_data(event: SessionEvent, user: Any, asked: dict[str, Any]) -> dict[str, Any]:
    """A session event as the API's events endpoint shows it, but its questions through
    the envelope (withheld from whoever may not answer them)."""
    calls = []
    for call in event.function_calls or []:
        interrupt = asked.get(call.get("id"))
        if interrupt is None:  # no question row to judge by: show no arguments
            calls.append({"id": call.get("id"), "name": call.get("name"), "question": None})
        else:
            question = shown(interrupt, user)
            visible = "payload" in question  # the envelope, not the withheld form
            args = call.get("args") if visible else None
            calls.append({**call, "args": args, "question": question})
    return {
        "id": event.pk,
        "invocation": str(event.invocation_id),
        "author": event.author,
        "path": event.path,
        "run_id": event.run_id,
        "status": event.status or None,
        "output": event.output,
        "route": event.route or None,
        "function_calls": calls,
        "function_responses": event.function_responses,
        "long_running_tool_ids": event.long_running_tool_ids,
        "error": event.error or None,
        "timestamp": event.timestamp,
    }


def node_run_data(event: SessionEvent) -> dict[str, Any]:
    return {
        "path": event.path,
        "name": event.author,
        "run_id": event.run_id,
        "status": event.status,
        "event": event.pk,
    }


EVENT_FIELDS = [f.name for f in SessionEvent._meta.concrete_fields]


class StreamReader:
    """Reads an invocation's events after a position."""

    def __init__(self, invocation_id: str, user: Any) -> None:
        self.invocation_id = invocation_id
        self.user = user

    def read(self, after: Position) -> Batch:
        # The invocation first: a status was committed with (or after) the events that
        # led to it, so the events read next include them all.
        invocation = Invocation.objects.only("status", "output", "error", "lease_owner").get(
            pk=self.invocation_id
        )
        rows = list(
            SessionEvent.objects.filter(invocation_id=self.invocation_id, id__gte=after.event_id)
            .order_by("id")
            .only(*EVENT_FIELDS)[: BATCH + 1]
        )
        batch = Batch(
            events=rows[:BATCH],
            position=after,
            status=NodeStatus(invocation.status),
            output=invocation.output,
            error=invocation.error,
            more=len(rows) > BATCH,
        )
        if not batch.more and not batch.status.is_final:  # caught up: what runs now
            batch.running = list(
                NodeRun.objects.filter(invocation_id=self.invocation_id, status=NodeStatus.RUNNING)
                .order_by("id")
                .only("path", "name", "run_id", "attempt")
            )
        for event in batch.events:
            batch.position = max(batch.position, Position(event.pk, bool(event.status)))
        batch.stopped = not batch.more and (
            batch.final
            or (
                batch.status == NodeStatus.WAITING
                and not invocation.lease_owner
                and not self._answers_waiting()
            )
        )
        return batch

    def _answers_waiting(self) -> bool:
        return Interrupt.objects.filter(
            invocation_id=self.invocation_id,
            status__in=ANSWERED_STATUSES,
            consumed=False,
            deferred=False,
        ).exists()


def live_messages(
    batch: Batch, after: Position, user: Any, announced: set[tuple[str, int, int]]
) -> list[str]:
    """The live stream's SSE events for a batch read after `after`; the node runs found
    running that are not in `announced` (this connection's, updated) too."""
    ids = [c.get("id") for e in batch.events for c in e.function_calls or [] if isinstance(c, dict)]
    asked = questions([i for i in ids if isinstance(i, str)]) if ids else {}
    sent = []
    for event in batch.events:
        position = Position(event.pk)
        if position > after:
            sent.append(sse(event_data(event, user, asked), "session", position))
        changed = Position(event.pk, True)
        if event.status and changed > after:
            sent.append(sse(node_run_data(event), "node_run", changed))
    for run in batch.running:
        attempt = (run.path, run.run_id, run.attempt)
        if attempt not in announced:
            announced.add(attempt)
            started = {"path": run.path, "name": run.name, "run_id": run.run_id}
            sent.append(
                sse({**started, "status": NodeStatus.RUNNING, "attempt": run.attempt}, "node_run")
            )
    if batch.final:
        end = {"status": batch.status, "output": batch.output, "error": batch.error}
        sent.append(sse(end, "end"))
    return sent


class Capacity:
    """How many streams this process serves at once (HITL["STREAM_MAX_CLIENTS"])."""

    def __init__(self) -> None:
        self.open = 0
        self.lock = threading.Lock()

    def take(self) -> Slot:
        with self.lock:
            limit = hitl_settings.STREAM_MAX_CLIENTS
            if self.open >= limit:
                raise StreamCapacityError(
                    f"this server already serves {limit} live streams; try again later"
                )
            self.open += 1
        return Slot(self)


class Slot:
    """One stream's place; given back once, by whichever of the stream's end or the
    response's close comes first."""

    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self.held = True

    def release(self) -> None:
        with self.capacity.lock:
            if self.held:
                self.held = False
                self.capacity.open -= 1


capacity = Capacity()


def _subscription(invocation_id: str) -> AbstractAsyncContextManager[asyncio.Event | None]:
    lsn = wakeup.listener()
    return lsn.subscription(invocation_id) if lsn is not None else nullcontext(None)


class Reader(Protocol):
    """What `follow` reads: a position's news in a batch with `position` and `more`
    (StreamReader's Batch; the approvals' question feed has its own), woken by
    `invocation_id`'s channel."""

    invocation_id: str

    def read(self, after: Any) -> Any: ...


Render = Callable[[Any, Any], list[str]]  # (batch, position read after) -> SSE events
Done = Callable[[Any], bool]


def _ended(batch: Batch) -> bool:
    return batch.final


async def follow_async(
    reader: Reader, after: Any, slot: Slot, render: Render, done: Done = _ended
) -> AsyncIterator[str]:
    """A stream under ASGI: what `render` makes of each read, until `done`, or until the
    client goes (the server cancels it). No thread is held while it waits."""
    try:
        keep_alive = float(hitl_settings.STREAM_KEEPALIVE_SECONDS)
        async with _subscription(reader.invocation_id) as woken:
            # With LISTEN a stream reads only when woken (the listener wakes every
            # stream when it reconnects); without, it polls.
            period = keep_alive if woken else min(keep_alive, hitl_settings.STREAM_POLL_SECONDS)
            position, last_sent = after, time.monotonic()
            while True:
                if woken is not None:
                    woken.clear()
                batch, sent = await sync_to_async(_step, thread_sensitive=False)(
                    reader, position, render
                )
                position = batch.position
                if sent:
                    yield "".join(sent)
                    last_sent = time.monotonic()
                if done(batch):
                    return
                if batch.more:
                    continue
                while True:
                    woke = await _wait(woken, period)
                    if not woke and time.monotonic() - last_sent >= keep_alive:
                        yield KEEP_ALIVE
                        last_sent = time.monotonic()
                    if woke or woken is None:
                        break
    finally:
        slot.release()


def _step(reader: Reader, position: Any, render: Render) -> tuple[Any, list[str]]:
    """A read and its rendering (both ask the database), from a thread of the shared
    pool, giving its connection back as the database settings say (CONN_MAX_AGE), as a
    request would."""
    try:
        batch = reader.read(position)
        return batch, render(batch, position)
    finally:
        close_old_connections()


async def _wait(woken: asyncio.Event | None, seconds: float) -> bool:
    """Whether something woke the stream within `seconds`."""
    if woken is None:
        await asyncio.sleep(seconds)
        return False
    try:
        await asyncio.wait_for(woken.wait(), seconds)
    except TimeoutError:
        return False
    return True


def follow(
    reader: Reader, after: Any, slot: Slot, render: Render, done: Done = _ended
) -> Iterator[str]:
    """A stream under WSGI: the request's thread polls (one thread per client)."""
    try:
        keep_alive = float(hitl_settings.STREAM_KEEPALIVE_SECONDS)
        period = min(keep_alive, hitl_settings.STREAM_POLL_SECONDS)
        position, last_sent = after, time.monotonic()
        while True:
            batch = reader.read(position)
            sent = render(batch, position)
            position = batch.position
            if sent:
                yield "".join(sent)
                last_sent = time.monotonic()
            if done(batch):
                return
            if batch.more:
                continue
            time.sleep(period)
            if time.monotonic() - last_sent >= keep_alive:
                yield KEEP_ALIVE
                last_sent = time.monotonic()
    finally:
        slot.release()


def live_stream(reader: StreamReader, after: Position, slot: Slot, *, asgi: bool) -> Any:
    """The live stream's body: the async iterator under ASGI, else the polling one."""
    first = [f"retry: {RETRY_MILLISECONDS}\n\n"]  # sent once, with the first read
    announced: set[tuple[str, int, int]] = set()  # node-run starts this connection sent

    def render(batch: Batch, position: Position) -> list[str]:
        sent = [*first, *live_messages(batch, position, reader.user, announced)]
        first.clear()
        return sent

    if asgi:
        return follow_async(reader, after, slot, render)
    return follow(reader, after, slot, render)


def event_stream(content: Any, slot: Slot) -> StreamingHttpResponse:
    """A text/event-stream response that no proxy buffers, holds no database connection
    between reads, and gives back its place whichever comes first: its end, or the server
    closing it (a response the server never iterates, when the client left first)."""
    # Under ASGI the view's thread would keep its database connection for as long as the
    # stream lasts (one per client); the stream's reads take theirs from the shared pool.
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    response._resource_closers.insert(0, slot.release)  # type: ignore[attr-defined]
    return response
