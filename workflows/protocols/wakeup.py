"""What wakes a live stream: on PostgreSQL one `LISTEN hitl_stream` connection per process
(per event loop), shared by every open stream, which sets the waiting streams' events when
a transaction that touched their invocation commits (migration 0013's triggers send the
notification); on other databases nothing, and the streams poll."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

from django.db import connections

CHANNEL = "hitl_stream"
RECONNECT_SECONDS = 1.0

logger = logging.getLogger(__name__)


def conninfo(using: str = "default") -> str:
    """The libpq connection string of the database alias `using`."""
    from psycopg.conninfo import make_conninfo

    params = connections[using].get_connection_params()
    keys = ("dbname", "user", "password", "host", "port", "sslmode", "sslrootcert", "options")
    return make_conninfo(**{k: params[k] for k in keys if params.get(k) not in (None, "")})


class Listener:
    """One listening connection for every stream of a process, opened with the first
    subscriber and closed with the last (a process with no stream holds no connection)."""

    def __init__(self, using: str = "default") -> None:
        self.using = using
        self.waiting: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Event | None = None

    @property
    def subscribers(self) -> int:
        return sum(len(events) for events in self.waiting.values())

    @contextlib.asynccontextmanager
    async def subscription(self, invocation_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever the invocation changes, listening before it is yielded
        (so a change committed after the caller's next read is never missed)."""
        woken = asyncio.Event()
        self.waiting[invocation_id].add(woken)
        try:
            ready = self._start()
            await ready.wait()
            yield woken
        finally:
            events = self.waiting.get(invocation_id)
            if events is not None:
                events.discard(woken)
                if not events:
                    del self.waiting[invocation_id]
            if not self.waiting:
                await self._stop()

    def _start(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.ready = asyncio.Event()
            self.task = loop.create_task(self._listen(self.ready))
        assert self.ready is not None
        return self.ready

    async def _stop(self) -> None:
        task, self.task = self.task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _listen(self, ready: asyncio.Event) -> None:
        import psycopg

        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(
                    conninfo(self.using), autocommit=True
                )
                async with connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    ready.set()
                    self._wake(list(self.waiting))  # what changed while not listening
                    async for notice in connection.notifies():
                        self._wake([notice.payload])
            except psycopg.Error as error:
                logger.warning("hitl stream listener: %s; reconnecting", error)
                # Streams still wake on their keep-alive re-read meanwhile.
                ready.set()
                await asyncio.sleep(RECONNECT_SECONDS)

    def _wake(self, invocation_ids: list[str]) -> None:
        for invocation_id in invocation_ids:
            for woken in self.waiting.get(invocation_id, ()):
                woken.set()


_listeners: dict[str, Listener] = {}


def listener(using: str = "default") -> Listener | None:
    """The process's listener for `using`, or None where the database has no LISTEN."""
    if connections[using].vendor != "postgresql":
        return None
    if using not in _listeners:
        _listeners[using] = Listener(using)
    return _listeners[using]


def open_listeners() -> list[Any]:
    """The listeners with a running connection (tests check none is left behind)."""
    return [lsn for lsn in _listeners.values() if lsn.task is not None and not lsn.task.done()]
