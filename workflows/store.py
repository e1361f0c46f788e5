"""The engine's Store protocol on the Django ORM.

Every method has a synchronous core (`*_sync`) that services call inside their own
transactions, and the async method the engine awaits, which runs the core in the caller's
thread (asgiref's thread-sensitive executor) so it shares its connection.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import asdict
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
from .engine.state import (
    Checkpoint,
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    Resolution,
    WriteBatch,
)
from .engine.status import InterruptStatus, NodeStatus
from .models import Interrupt, Invocation, NodeRun, Session, SessionEvent

ANSWERED = [InterruptStatus.RESOLVED, InterruptStatus.EXPIRED]
INVOCATIONS = Invocation._meta.db_table
NODE_RUNS = NodeRun._meta.db_table
EVENTS = SessionEvent._meta.db_table
INTERRUPTS = Interrupt._meta.db_table
NODE_RUN_COLUMNS = [
    "invocation_id",
    "path",
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
    "created_at",
    "updated_at",
]
EVENT_COLUMNS = [
    "invocation_id",
    "author",
    "path",
    "run_id",
    "status",
    "output",
    "route",
    "function_calls",
    "function_responses",
    "long_running_tool_ids",
    "error",
    "timestamp",
]


NODE_RUN_CONFLICT = "ON CONFLICT (invocation_id, path) DO UPDATE SET " + ", ".join(
    f"{c} = EXCLUDED.{c}" for c in NODE_RUN_COLUMNS[2:] if c != "created_at"
)


def _is_step(batch: WriteBatch) -> bool:
    """A node-run transition of a leased execution: no interrupt rows to create or close."""
    return batch.lease_owner is not None and not batch.resolutions and not batch.new_interrupts


@functools.cache
def _cast_marks(using: str, model: Any, columns: tuple[str, ...]) -> str:
    connection = connections[using]
    types = {f.column: f.db_type(connection) for f in model._meta.concrete_fields}
    return ", ".join(f"CAST(%s AS {types[c]})" for c in columns)


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _dumps(value: Any) -> str:
    return json.dumps(value)


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
    # The per-step path (invocation row, node runs, events, consumed answers) is plain SQL:
    # it runs once per node transition, and the ORM's per-call compilation cost more than
    # the database round trips themselves.

    def commit_sync(self, batch: WriteBatch) -> None:
        now = timezone.now()
        connection = connections[self.using]
        if connection.vendor == "postgresql" and _is_step(batch):
            self._commit_step_postgresql(connection, batch, now)
            return
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            self._write_invocation(cursor, batch, now)
            for resolution in batch.resolutions:
                self._resolve(resolution, now)
            if batch.node_runs:
                self._upsert_node_runs(cursor, batch, now)
            if batch.new_interrupts:
                self._create_interrupts(batch.new_interrupts)
            if batch.events:
                self._insert_events(cursor, batch)
            if batch.consumed:
                ids = sorted(batch.consumed)
                cursor.execute(
                    f"UPDATE {INTERRUPTS} SET consumed = %s WHERE id IN ({_marks(len(ids))}) "
                    f"AND status IN (%s, %s)",
                    [True, *ids, *ANSWERED],
                )
            signals.announce(batch, self.using)

    def _commit_step_postgresql(self, connection: Any, batch: WriteBatch, now: Any) -> None:
        """One node-run transition as one statement: one round trip, atomic by itself.

        Every write is conditional on the invocation UPDATE (lease held, not cancelled)."""
        parts, params = [], []
        invocation_sql, invocation_params = self._invocation_update(batch, now)
        parts.append(f"inv AS ({invocation_sql} RETURNING id)")
        params += invocation_params
        if batch.node_runs:
            rows, values = self._node_run_values(batch, now, cast=True)
            parts.append(
                f"runs AS (INSERT INTO {NODE_RUNS} ({', '.join(NODE_RUN_COLUMNS)}) "
                f"SELECT * FROM (VALUES {rows}) AS v WHERE EXISTS (SELECT 1 FROM inv) "
                f"{NODE_RUN_CONFLICT})"
            )
            params += values
        if batch.events:
            rows, values = self._event_values(batch, cast=True)
            parts.append(
                f"events AS (INSERT INTO {EVENTS} ({', '.join(EVENT_COLUMNS)}) "
                f"SELECT * FROM (VALUES {rows}) AS v WHERE EXISTS (SELECT 1 FROM inv))"
            )
            params += values
        if batch.consumed:
            ids = sorted(batch.consumed)
            parts.append(
                f"consumed AS (UPDATE {INTERRUPTS} SET consumed = true "
                f"WHERE id IN ({_marks(len(ids))}) AND status IN (%s, %s) "
                f"AND EXISTS (SELECT 1 FROM inv))"
            )
            params += [*ids, *ANSWERED]
        with connection.cursor() as cursor:
            cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM inv", params)
            (written,) = cursor.fetchone()
        if not written:
            self._refuse(batch)
        signals.announce(batch, self.using)

    def _pk(self, invocation_id: str) -> Any:
        return Invocation._meta.pk.get_db_prep_value(invocation_id, connections[self.using])

    def _datetime(self, value: Any) -> Any:
        return connections[self.using].ops.adapt_datetimefield_value(value)

    def _invocation_update(self, batch: WriteBatch, now: Any) -> tuple[str, list[Any]]:
        """The UPDATE that renews the lease and refuses writes to a cancelled invocation."""
        invocation = batch.invocation
        assignments, values = ["updated_at = %s"], [self._datetime(now)]
        if invocation is not None:
            assignments += ["status = %s", "output = %s", "error = %s"]
            values += [invocation.status, _dumps(invocation.output), invocation.error or ""]
            if invocation.status.is_final:
                assignments.append("finished_at = %s")
                values.append(self._datetime(now))
        conditions, arguments = ["id = %s"], [self._pk(batch.invocation_id)]
        if invocation is None or invocation.status != NodeStatus.CANCELLED:
            conditions.append("status <> %s")
            arguments.append(NodeStatus.CANCELLED)
        if batch.lease_owner is not None:
            assignments.append("lease_expires_at = %s")
            values.append(self._datetime(now + timedelta(seconds=self.lease_seconds)))
            conditions.append("lease_owner = %s")
            arguments.append(batch.lease_owner)
        sql = f"UPDATE {INVOCATIONS} SET {', '.join(assignments)} WHERE {' AND '.join(conditions)}"
        return sql, values + arguments

    def _write_invocation(self, cursor: Any, batch: WriteBatch, now: Any) -> None:
        if batch.lease_owner is None and batch.invocation is None:
            return  # nothing to write on the invocation row, and no lease to check
        cursor.execute(*self._invocation_update(batch, now))
        if not cursor.rowcount:
            self._refuse(batch)

    def _refuse(self, batch: WriteBatch) -> None:
        """The invocation UPDATE matched nothing: create a missing invocation, or say why."""
        status = (
            Invocation.objects.using(self.using)
            .filter(pk=batch.invocation_id)
            .values_list("status", flat=True)
            .first()
        )
        if status is None and batch.invocation is not None:
            self._create_invocation(batch.invocation)
        elif status == NodeStatus.CANCELLED:
            raise InvocationCancelledError(f"invocation {batch.invocation_id} was cancelled")
        else:
            raise LeaseLostError(f"invocation {batch.invocation_id} is leased to another run")

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

    def _resolve(self, resolution: Resolution, now: Any) -> None:
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

    def _node_run_values(
        self, batch: WriteBatch, now: Any, cast: bool = False
    ) -> tuple[str, list[Any]]:
        invocation_pk, stamp = self._pk(batch.invocation_id), self._datetime(now)
        values: list[Any] = []
        for path, state in batch.node_runs.items():
            values += [
                invocation_pk,
                path,
                state.parent_path,
                state.name,
                state.run_id,
                state.status,
                _dumps(state.input),
                _dumps(state.output),
                state.route or "",
                _dumps(sorted(state.interrupt_ids)),
                _dumps(state.resume_inputs),
                state.attempt,
                state.error or "",
                stamp,
                stamp,
            ]
        return self._rows(NodeRun, NODE_RUN_COLUMNS, len(batch.node_runs), cast), values

    def _event_values(self, batch: WriteBatch, cast: bool = False) -> tuple[str, list[Any]]:
        invocation_pk = self._pk(batch.invocation_id)
        values: list[Any] = []
        for event in batch.events:
            values += [
                invocation_pk,
                event.author,
                event.path,
                event.run_id,
                event.status or "",
                _dumps(event.output),
                event.route or "",
                _dumps([asdict(c) for c in event.function_calls]),
                _dumps([asdict(r) for r in event.function_responses]),
                _dumps(list(event.long_running_tool_ids)),
                event.error or "",
                event.timestamp,
            ]
        return self._rows(SessionEvent, EVENT_COLUMNS, len(batch.events), cast), values

    def _rows(self, model: Any, columns: list[str], count: int, cast: bool) -> str:
        """`(%s, ...), ...` for `count` rows; with `cast`, each mark cast to its column's
        type (VALUES inside a SELECT does not take its types from the target table)."""
        marks = _cast_marks(self.using, model, tuple(columns)) if cast else None
        return ", ".join([f"({marks or _marks(len(columns))})"] * count)

    def _upsert_node_runs(self, cursor: Any, batch: WriteBatch, now: Any) -> None:
        rows, values = self._node_run_values(batch, now)
        cursor.execute(
            f"INSERT INTO {NODE_RUNS} ({', '.join(NODE_RUN_COLUMNS)}) VALUES {rows} "
            f"{NODE_RUN_CONFLICT}",
            values,
        )

    def _insert_events(self, cursor: Any, batch: WriteBatch) -> None:
        rows, values = self._event_values(batch)
        cursor.execute(f"INSERT INTO {EVENTS} ({', '.join(EVENT_COLUMNS)}) VALUES {rows}", values)

    def _create_interrupts(self, records: list[InterruptRecord]) -> None:
        try:
            with transaction.atomic(using=self.using):
                Interrupt.objects.using(self.using).bulk_create([interrupt_row(r) for r in records])
        except IntegrityError:
            ids = [r.id for r in records]
            held = Interrupt.objects.using(self.using).filter(pk__in=ids).first()
            raise DuplicateInterruptError(
                held.id if held else ids[0], held.path if held else "another node run"
            ) from None

    # -- lease ---------------------------------------------------------------------------
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
