"""The worker's side of the write path: run the engine for an invocation (the run task's
job), fail an invocation that cannot run, and the periodic sweeps that expire overdue
interrupts and re-enqueue stalled work. `services` re-exports these names."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from . import dispatch
from .audit import actions, trail
from .audit.canonical import timestamp
from .conf import hitl_settings
from .engine.errors import DefinitionChangedError
from .engine.events import DefaultResponse
from .engine.runner import Runner
from .engine.state import Checkpoint, WriteBatch
from .engine.status import InterruptStatus, NodeStatus
from .engine.transitions import expire_batch
from .models import Interrupt, Invocation, NodeRun
from .registry import registry
from .store import DjangoStore
from .transactions import locked_checkpoint, store, write_transaction

logger = logging.getLogger(__name__)


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


class _HandedLeases(threading.local):
    """Leases taken by a transaction that gave an invocation work, for the run this thread
    executes once it commits: {invocation id: (owner, workflow version, checkpoint)}."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[str, str, Checkpoint]] = {}


_handed = _HandedLeases()


def enqueue_run_here(db: DjangoStore, invocation_id: Any, *, new: bool = False) -> None:
    """`dispatch.enqueue_run`, taking the invocation's lease in the current transaction
    when that run executes in this thread right after the commit (Celery eager, the
    outermost transaction): the run then starts at once, without a lease transaction of
    its own (on PostgreSQL a commit and two round trips: docs/performance.md). Not
    taken (another run holds the lease, or one left it unfinished): the run takes it
    itself, as in a worker. `new`: the invocation was created in this transaction."""
    key = str(invocation_id)
    taken = None
    if dispatch.runs_in_process() and not connection.savepoint_ids:
        # (Not in a caller's transaction: it may outlast the lease.)
        owner = os.urandom(16).hex()
        taken = db.take_free_lease_sync(key, owner, db.lease_seconds, new=new)
    if taken is None:
        dispatch.enqueue_run(invocation_id)
        return
    checkpoint, version = taken
    # Handed over once committed (a rolled-back transaction leaves nothing behind), to
    # the run enqueued next; a lease that run did not claim (it never executed) is given
    # back, so the work waits for no lease to expire.
    handed = (owner, version, checkpoint)
    transaction.on_commit(lambda: _handed.runs.__setitem__(key, handed))
    dispatch.enqueue_run(invocation_id)
    transaction.on_commit(lambda: _give_back_unclaimed(key, owner), robust=True)


def _give_back_unclaimed(key: str, owner: str) -> None:
    if _handed.runs.get(key, (None,))[0] == owner:
        del _handed.runs[key]
        store().release_lease_sync(key, owner)


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
    handed = _handed.runs.pop(str(invocation_id), None)
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


def expire_overdue_interrupts(now: datetime | None = None) -> int:
    """Expire each pending interrupt past its deadline exactly once and apply its policy.

    Each interrupt in a transaction of its own: one that fails is logged and left for the
    next sweep, the others go on. The fail policy waits while a run holds the lease (that
    run decides the invocation's outcome; the next sweep applies it)."""
    now = now or timezone.now()
    overdue = Interrupt.objects.filter(status=InterruptStatus.PENDING, deadline__lte=now)
    expired = 0
    for interrupt_id, invocation_id in overdue.values_list("id", "invocation_id")[:500]:
        try:
            expired += _expire(interrupt_id, invocation_id, now)
        except Exception:
            logger.exception("expiring interrupt %s of invocation %s", interrupt_id, invocation_id)
    return expired


@write_transaction
def _expire(interrupt_id: str, invocation_id: Any, now: datetime) -> int:
    db = store()
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    record = checkpoint.interrupts.get(interrupt_id) if checkpoint else None
    if checkpoint is None or record is None or record.status != InterruptStatus.PENDING:
        return 0  # answered or expired meanwhile
    fails = not isinstance(record.request.on_timeout, DefaultResponse)
    if fails and Invocation.objects.leased().filter(pk=invocation_id).exists():
        return 0
    db.commit_sync(expire_batch(checkpoint, interrupt_id, now))
    applied = {"policy": "fail"}
    if not fails:
        applied = {"policy": "default_response", "response": record.request.on_timeout.response}
    deadline = timestamp(record.deadline) if record.deadline else None
    trail.record(
        actions.INTERRUPT_EXPIRED, interrupt=record, data={"deadline": deadline, **applied}
    )
    dispatch.enqueue_run(invocation_id)
    return 1


def recover_stalled(now: datetime | None = None) -> int:
    """Re-enqueue the stalled invocations (see `InvocationQuerySet.stalled`). Each once
    until a run takes it (or again after HITL["STALLED_AFTER_SECONDS"], should that
    message be lost), so a backlog does not flood the broker."""
    now = now or timezone.now()
    period = timedelta(seconds=hitl_settings.STALLED_AFTER_SECONDS)
    not_recently = Q(recovery_enqueued_at__isnull=True) | Q(recovery_enqueued_at__lt=now - period)
    stalled = Invocation.objects.stalled(now, period).filter(not_recently)
    invocation_ids = set(stalled.values_list("pk", flat=True)[:1000])
    Invocation.objects.filter(pk__in=invocation_ids).update(recovery_enqueued_at=now)
    for invocation_id in invocation_ids:
        dispatch.send_run(invocation_id)
    return len(invocation_ids)
