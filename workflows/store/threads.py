"""Where the store's synchronous code runs: in the caller's thread (the one that owns the
database connection), or on an inline store's own event loop; and the thread that keeps
inline runs' leases alive while a synchronous node body blocks their loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

if TYPE_CHECKING:
    from .django_store import DjangoStore


async def in_caller_thread(func: Any, *args: Any) -> Any:
    return await sync_to_async(partial(func, *args), thread_sensitive=True)()


def outside_loop(func: Any, *args: Any) -> Any:
    """Call blocking database code from the event loop's own thread. The loop is this
    run's alone (services.execute drives it in the thread that owns the connection), so
    blocking it is what is meant; Django refuses ORM calls while a loop runs in the
    thread, so the loop is set aside for the call."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        return func(*args)
    finally:
        asyncio.events._set_running_loop(loop)


@dataclass(slots=True)
class _Lease:
    store: DjangoStore
    invocation_id: str
    ttl: float
    renews_at: float  # on the monotonic clock
    on_lost: Callable[[], None]


class KeepAlive:
    """One thread per process renews the leases of the runs whose loop a synchronous
    node body may block (inline stores): each every third of its length, on the thread's
    own connection. A lease found lost calls the run's `on_lost` (from this thread)."""

    def __init__(self) -> None:
        self._leases: dict[str, _Lease] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        # When the thread next looks at the leases (it is woken only for an earlier one:
        # waking it costs the running invocation 8-18 µs of thread switches,
        # docs/performance.md).
        self._wakes_at = float("inf")

    @contextlib.contextmanager
    def keep_alive(
        self,
        store: DjangoStore,
        invocation_id: str,
        owner: str,
        ttl: float,
        on_lost: Callable[[], None],
    ) -> Iterator[None]:
        entry = _Lease(store, invocation_id, ttl, time.monotonic() + ttl / 3, on_lost)
        with self._changed:
            self._leases[owner] = entry
            if self._thread is None or not self._thread.is_alive():
                self._wakes_at = 0.0
                self._thread = threading.Thread(
                    target=self._run, name="hitl-lease-keep-alive", daemon=True
                )
                self._thread.start()
            elif entry.renews_at < self._wakes_at:
                self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._leases.pop(owner, None)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                due = [(o, e) for o, e in self._leases.items() if e.renews_at <= now]
                if not due:
                    renewals = (e.renews_at for e in self._leases.values())
                    self._wakes_at = min(renewals, default=now + 60)
                    self._changed.wait(self._wakes_at - now)
                    self._wakes_at = 0.0
                    continue
                self._wakes_at = 0.0
            for owner, lease in due:
                try:
                    held = lease.store.renew_lease_apart(lease.invocation_id, owner, lease.ttl)
                except Exception:  # cannot tell now (a busy database): ask at the next beat
                    held = None
                with self._changed:
                    entry = self._leases.get(owner)
                    if entry is None:
                        continue  # the run ended meanwhile
                    entry.renews_at = time.monotonic() + lease.ttl / 3
                    if held is False:
                        del self._leases[owner]
                if held is False:
                    with contextlib.suppress(Exception):  # its loop is gone: the run ended
                        lease.on_lost()


KEEP_ALIVE = KeepAlive()
