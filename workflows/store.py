"""The engine's Store protocol on the Django ORM.

Every method has a synchronous core (`*_sync`) that services call inside their own
transactions, and the async method the engine awaits, which runs the core in the caller's
thread (asgiref's thread-sensitive executor) so it shares its connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from . import signals
from .engine.errors import (
    DuplicateInterruptError,
    InterruptNotPendingError,
    InvocationCancelledError,
    LeaseLostError,
)
from .engine.events import FAIL_ON_TIMEOUT, Event, FunctionCall, FunctionResponse, RequestInput
from .engine.state import Checkpoint, InterruptRecord, InvocationRecord, NodeRunState, WriteBatch
from .engine.status import InterruptStatus, NodeStatus
from .models import Interrupt, Invocation, NodeRun, Session, SessionEvent

ANSWERED = [InterruptStatus.RESOLVED, InterruptStatus.EXPIRED]
NODE_RUN_FIELDS = [
    "parent_path",
    "name",
    "run_id",
    "status",
    "input",
    "output",
    "route",
    "interrupt_ids",
    "resume_inputs",
    "attempt",
    "error",
    "updated_at",
]


def invocation_record(row: Invocation) -> InvocationRecord:
    return InvocationRecord(
        id=str(row.id),
        workflow_name=row.workflow_name,
        status=NodeStatus(row.status),
        input=row.input,
        output=row.output,
        error=row.error or None,
        session_id=str(row.session_id),
    )


def node_run_state(row: NodeRun) -> NodeRunState:
    return NodeRunState(
        status=NodeStatus(row.status),
        run_id=row.run_id,
        output=row.output,
        interrupt_ids=set(row.interrupt_ids),
        attempt=row.attempt,
        name=row.name,
        parent_path=row.parent_path,
        input=row.input,
        route=row.route or None,
        resume_inputs=dict(row.resume_inputs),
        error=row.error or None,
    )


def interrupt_record(row: Interrupt) -> InterruptRecord:
    return InterruptRecord(
        id=row.id,
        invocation_id=str(row.invocation_id),
        workflow_name=row.workflow_name,
        path=row.path,
        run_id=row.run_id,
        request=RequestInput.from_dict(
            {
                "interrupt_id": row.id,
                "message": row.message,
                "payload": row.payload,
                "response_schema": row.response_schema,
                "timeout": row.timeout_seconds,
                "on_timeout": row.on_timeout,
            }
        ),
        status=InterruptStatus(row.status),
        response=row.response,
        consumed=row.consumed,
        resolved_by=row.resolved_by_id,
        resolved_at=row.resolved_at,
        deadline=row.deadline,
    )


def event_from_row(row: SessionEvent) -> Event:
    return Event(
        invocation_id=str(row.invocation_id),
        author=row.author,
        path=row.path,
        run_id=row.run_id,
        status=NodeStatus(row.status) if row.status else None,
        output=row.output,
        route=row.route or None,
        function_calls=[FunctionCall(**c) for c in row.function_calls],
        function_responses=[FunctionResponse(**r) for r in row.function_responses],
        long_running_tool_ids=list(row.long_running_tool_ids),
        error=row.error or None,
        timestamp=row.timestamp,
    )


def event_row(invocation_id: str, event: Event) -> SessionEvent:
    data = event.to_dict()
    return SessionEvent(
        invocation_id=invocation_id,
        author=event.author,
        path=event.path,
        run_id=event.run_id,
        status=event.status or "",
        output=event.output,
        route=event.route or "",
        function_calls=data["function_calls"],
        function_responses=data["function_responses"],
        long_running_tool_ids=list(event.long_running_tool_ids),
        error=event.error or "",
        timestamp=event.timestamp,
    )


def interrupt_row(record: InterruptRecord) -> Interrupt:
    request = record.request.to_dict()
    return Interrupt(
        id=record.id,
        invocation_id=record.invocation_id,
        workflow_name=record.workflow_name,
        path=record.path,
        run_id=record.run_id,
        message=request["message"] or "",
        payload=request["payload"],
        response_schema=request["response_schema"],
        timeout_seconds=request["timeout"],
        on_timeout=None if request["on_timeout"] == FAIL_ON_TIMEOUT else request["on_timeout"],
        deadline=record.deadline,
        status=record.status,
    )


class DjangoStore:
    """Store on the ORM (database alias `using`)."""

    def __init__(self, using: str = "default", lease_seconds: float = 60.0) -> None:
        self.using = using
        self.lease_seconds = lease_seconds

    # -- reads -------------------------------------------------------------------------
    def load_checkpoint_sync(self, invocation_id: str, *, lock: bool = False) -> Checkpoint | None:
        invocations = Invocation.objects.using(self.using)
        if lock:
            invocations = invocations.select_for_update()
        row = invocations.filter(pk=invocation_id).first()
        if row is None:
            return None
        runs = NodeRun.objects.using(self.using).filter(invocation_id=invocation_id)
        interrupts = Interrupt.objects.using(self.using).filter(
            Q(status=InterruptStatus.PENDING) | Q(consumed=False, status__in=ANSWERED),
            invocation_id=invocation_id,
        )
        return Checkpoint(
            invocation=invocation_record(row),
            node_runs={r.path: node_run_state(r) for r in runs},
            interrupts={i.id: interrupt_record(i) for i in interrupts},
        )

    def load_interrupts_sync(
        self, ids: Iterable[str], *, lock: bool = False
    ) -> dict[str, InterruptRecord]:
        rows = Interrupt.objects.using(self.using).filter(pk__in=sorted(set(ids)))
        if lock:
            rows = rows.select_for_update().order_by("pk")
        return {row.id: interrupt_record(row) for row in rows}

    def load_events_sync(self, invocation_id: str) -> list[Event]:
        rows = SessionEvent.objects.using(self.using).filter(invocation_id=invocation_id)
        return [event_from_row(r) for r in rows.order_by("id")]

    # -- writes ------------------------------------------------------------------------
    def commit_sync(self, batch: WriteBatch) -> None:
        now = timezone.now()
        invocation_id = batch.invocation_id
        with transaction.atomic(using=self.using):
            self._write_invocation(batch, now)
            for resolution in batch.resolutions:
                updated = (
                    Interrupt.objects.using(self.using)
                    .filter(pk=resolution.interrupt_id, status=InterruptStatus.PENDING)
                    .update(
                        status=resolution.status,
                        response=resolution.response,
                        resolved_by_id=resolution.actor,
                        resolved_at=resolution.at or now,
                    )
                )
                if not updated:
                    current = (
                        Interrupt.objects.using(self.using)
                        .filter(pk=resolution.interrupt_id)
                        .values_list("status", flat=True)
                        .first()
                    )
                    raise InterruptNotPendingError(resolution.interrupt_id, current or "missing")
            if batch.node_runs:
                NodeRun.objects.using(self.using).bulk_create(
                    [
                        self._node_run_row(invocation_id, p, s, now)
                        for p, s in batch.node_runs.items()
                    ],
                    update_conflicts=True,
                    unique_fields=["invocation", "path"],
                    update_fields=NODE_RUN_FIELDS,
                )
            if batch.new_interrupts:
                try:
                    with transaction.atomic(using=self.using):
                        Interrupt.objects.using(self.using).bulk_create(
                            [interrupt_row(r) for r in batch.new_interrupts]
                        )
                except IntegrityError:
                    ids = [r.id for r in batch.new_interrupts]
                    held = Interrupt.objects.using(self.using).filter(pk__in=ids).first()
                    raise DuplicateInterruptError(
                        held.id if held else ids[0], held.path if held else "another node run"
                    ) from None
            if batch.events:
                SessionEvent.objects.using(self.using).bulk_create(
                    [event_row(invocation_id, e) for e in batch.events]
                )
            if batch.consumed:
                Interrupt.objects.using(self.using).filter(
                    pk__in=batch.consumed, status__in=ANSWERED
                ).update(consumed=True)
            signals.announce(batch, self.using)

    def _write_invocation(self, batch: WriteBatch, now: Any) -> None:
        """Renew the lease and refuse writes to a cancelled invocation, in one UPDATE."""
        changes: dict[str, Any] = {"updated_at": now}
        invocation = batch.invocation
        if invocation is not None:
            changes.update(
                status=invocation.status,
                output=invocation.output,
                error=invocation.error or "",
            )
            if invocation.status.is_final:
                changes["finished_at"] = now
        rows = Invocation.objects.using(self.using).filter(pk=batch.invocation_id)
        cancelling = invocation is not None and invocation.status == NodeStatus.CANCELLED
        if not cancelling:
            rows = rows.exclude(status=NodeStatus.CANCELLED)
        if batch.lease_owner is not None:
            rows = rows.filter(lease_owner=batch.lease_owner)
            changes["lease_expires_at"] = now + timedelta(seconds=self.lease_seconds)
        elif invocation is None:
            return  # nothing to write on the invocation row, and no lease to check
        if rows.update(**changes):
            return
        if invocation is not None and not self._exists(batch.invocation_id):
            self._create_invocation(invocation)
            return
        status = (
            Invocation.objects.using(self.using)
            .filter(pk=batch.invocation_id)
            .values_list("status", flat=True)
            .first()
        )
        if status == NodeStatus.CANCELLED:
            raise InvocationCancelledError(f"invocation {batch.invocation_id} was cancelled")
        raise LeaseLostError(f"invocation {batch.invocation_id} is leased to another run")

    def _exists(self, invocation_id: str) -> bool:
        return Invocation.objects.using(self.using).filter(pk=invocation_id).exists()

    def _create_invocation(self, record: InvocationRecord) -> None:
        """An invocation started by the engine's own Runner (services create theirs)."""
        session_id = record.session_id
        if session_id is None:
            session_id = Session.objects.using(self.using).create().pk
        Invocation.objects.using(self.using).create(
            id=record.id,
            session_id=session_id,
            workflow_name=record.workflow_name,
            workflow_version="",
            status=record.status,
            input=record.input,
        )

    def _node_run_row(
        self, invocation_id: str, path: str, state: NodeRunState, now: Any
    ) -> NodeRun:
        return NodeRun(
            invocation_id=invocation_id,
            path=path,
            parent_path=state.parent_path,
            name=state.name,
            run_id=state.run_id,
            status=state.status,
            input=state.input,
            output=state.output,
            route=state.route or "",
            interrupt_ids=sorted(state.interrupt_ids),
            resume_inputs=state.resume_inputs,
            attempt=state.attempt,
            error=state.error or "",
            updated_at=now,
        )

    # -- lease ---------------------------------------------------------------------------
    def _lease_transaction(self) -> transaction.Atomic:
        return transaction.atomic(using=self.using)

    def _relax_durability(self) -> None:
        # A lease write lost in a crash leaves no lease held, which is what a crash means
        # anyway: it need not wait for the disk flush.
        connection = connections[self.using]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")

    def acquire_lease_sync(self, invocation_id: str, owner: str, ttl: float) -> bool:
        now = timezone.now()
        with transaction.atomic(using=self.using):
            self._relax_durability()
            return bool(
                Invocation.objects.using(self.using)
                .filter(pk=invocation_id)
                .filter(Q(lease_owner="") | Q(lease_owner=owner) | Q(lease_expires_at__lt=now))
                .update(lease_owner=owner, lease_expires_at=now + timedelta(seconds=ttl))
            )

    def release_lease_sync(self, invocation_id: str, owner: str) -> bool:
        with transaction.atomic(using=self.using):
            self._relax_durability()
            Invocation.objects.using(self.using).filter(pk=invocation_id, lease_owner=owner).update(
                lease_owner="", lease_expires_at=None
            )
            return (
                Interrupt.objects.using(self.using)
                .filter(
                    invocation_id=invocation_id,
                    invocation__status__in=[
                        NodeStatus.PENDING,
                        NodeStatus.RUNNING,
                        NodeStatus.WAITING,
                    ],
                    consumed=False,
                    status__in=ANSWERED,
                )
                .exists()
            )

    # -- the async protocol the engine awaits --------------------------------------------
    async def load_checkpoint(self, invocation_id: str) -> Checkpoint | None:
        return await _in_caller_thread(self.load_checkpoint_sync, invocation_id)

    async def load_interrupts(self, ids: Iterable[str]) -> dict[str, InterruptRecord]:
        return await _in_caller_thread(self.load_interrupts_sync, list(ids))

    async def load_events(self, invocation_id: str) -> list[Event]:
        return await _in_caller_thread(self.load_events_sync, invocation_id)

    async def commit(self, batch: WriteBatch) -> None:
        await _in_caller_thread(self.commit_sync, batch)

    async def acquire_lease(self, invocation_id: str, owner: str, ttl: float) -> bool:
        return await _in_caller_thread(self.acquire_lease_sync, invocation_id, owner, ttl)

    async def release_lease(self, invocation_id: str, owner: str) -> bool:
        return await _in_caller_thread(self.release_lease_sync, invocation_id, owner)


async def _in_caller_thread(func: Any, *args: Any) -> Any:
    return await sync_to_async(partial(func, *args), thread_sensitive=True)()
