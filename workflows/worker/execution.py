"""What the run task executes inside `celery worker`: the engine for an invocation until
it waits or finishes, under the invocation's lease (taken here, or handed over by the
transaction that gave it work: `store.leases`), and the poison guard that fails an
invocation that cannot run. `services` re-exports `execute` and `fail`."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.db.models import F
from django.utils import timezone

from ..conf import hitl_settings
from ..engine.errors import DefinitionChangedError
from ..engine.runner import Runner
from ..engine.state import WriteBatch
from ..engine.status import NodeStatus
from ..models import Invocation, NodeRun
from ..registry import registry
from ..store import DjangoStore, leases
from ..transactions import locked_checkpoint, store, write_transaction


@write_transaction
def fail(invocation_id: Any, error: str) -> None:
    """Mark an open invocation FAILED (a poison task, an incompatible definition).

    Not while another execution holds a live lease: that run decides the outcome (the
    invocation finishes once)."""
    db = store()
    checkpoint = locked_checkpoint(db, invocation_id)
    record = checkpoint.invocation
    if record.status.is_final:
        return
    if Invocation.objects.leased().filter(pk=record.id).exists():
        return
    record.status, record.error = NodeStatus.FAILED, error
    db.commit_sync(WriteBatch(record.id, invocation=record))


def execute(invocation_id: str) -> float | None:
    """Run the engine for an invocation until it waits or finishes (the worker's job).

    Returns None when done, or the seconds after which to try again: another run holds
    a live lease, and if that run died, its lease expires then (a redelivered message
    must not drop the work).

    Poison guard: each delivery that takes over an expired lease (a run that never
    finished: its worker died) or whose run raised counts one unfinished run; at
    HITL["MAX_DELIVERIES"] in a row the invocation fails instead of looping forever.
    Deliveries that find another run alive count nothing.
    """
    handed = leases.take_handed(invocation_id)
    if handed is None:
        row = store().read_for_execution_sync(str(invocation_id))
        if row is None:
            return None
        workflow_name, workflow_version, deliveries = row
    else:  # leased where the work was given (lease_for_run_here): open, none unfinished
        owner, workflow_version, checkpoint = handed
        workflow_name, deliveries = checkpoint.invocation.workflow_name, 0
    if deliveries >= hitl_settings.MAX_DELIVERIES:
        fail(
            invocation_id,
            f"gave up after {deliveries} runs that never finished "
            f'(a run task that kills its worker?); HITL["MAX_DELIVERIES"] is '
            f"{hitl_settings.MAX_DELIVERIES}",
        )
        return None
    try:
        workflow = registry.for_invocation(
            workflow_name,
            workflow_version,
            lambda: NodeRun.objects.filter(invocation_id=invocation_id).values_list(
                "path", flat=True
            ),
        )
    except (DefinitionChangedError, LookupError) as exc:
        if handed is not None:
            store().release_lease_sync(str(invocation_id), owner)
        fail(invocation_id, f"{type(exc).__name__}: {exc}")
        return None
    runner = Runner(
        workflow,
        store=DjangoStore(lease_seconds=hitl_settings.LEASE_SECONDS, inline=True),
        lease_ttl=hitl_settings.LEASE_SECONDS,
        max_value_bytes=hitl_settings.MAX_VALUE_BYTES,
        max_value_depth=hitl_settings.MAX_VALUE_DEPTH,
    )
    try:
        leased = None if handed is None else (owner, checkpoint)
        ran = _in_this_thread(runner.advance(str(invocation_id), wait=False, leased=leased))
    except Exception:
        Invocation.objects.open().filter(pk=invocation_id).update(
            unfinished_deliveries=F("unfinished_deliveries") + 1
        )
        raise
    if not ran:
        return _lease_remaining(invocation_id)
    if deliveries:
        # A run finished and let go of the lease: the invocation is not poison.
        Invocation.objects.filter(
            pk=invocation_id, lease_owner="", unfinished_deliveries__gt=0
        ).update(unfinished_deliveries=0)
    return None


_loops = threading.local()


def _in_this_thread(coroutine: Any) -> Any:
    """Drive the engine on an event loop in this thread, the one that owns the database
    connection: its store calls and synchronous node bodies run here without a hop to
    another thread (an inline DjangoStore). The loop is kept for the thread's next run."""
    loop = getattr(_loops, "loop", None)
    if loop is not None and loop.is_running():
        # Called from a node body of a run this thread drives (eager Celery): a loop of
        # its own for the nested run.
        nested = asyncio.new_event_loop()
        try:
            return nested.run_until_complete(coroutine)
        finally:
            nested.close()
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
    return loop.run_until_complete(coroutine)


def _lease_remaining(invocation_id: Any) -> float | None:
    """Seconds until the invocation's current lease expires (None: no lease now)."""
    expires = (
        Invocation.objects.open()
        .filter(pk=invocation_id)
        .exclude(lease_owner="")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    if expires is None:
        return None
    return max((expires - timezone.now()).total_seconds(), 0.0)
