"""The engine's Store protocol on the Django ORM.

Every method has a synchronous core (`*_sync`) that services call inside their own
transactions, and the async method the engine awaits, which runs the core in the caller's
thread (asgiref's thread-sensitive executor) so it shares its connection. A store made
with `inline=True` is for an engine whose event loop runs in the thread that owns the
connection (services.execute): it runs the cores there directly, with no thread hop, and
renews the lease from a thread of its own (see `keep_alive`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import signals, store_actions
from .conf import hitl_settings
from .engine.errors import (
    DuplicateInterruptError,
    InterruptNotPendingError,
    InvocationCancelledError,
    InvocationFinishedError,
    InvocationNotFoundError,
    LeaseLostError,
)
from .engine.events import FAIL_ON_TIMEOUT, Event, FunctionCall, FunctionResponse, RequestInput
from .engine.state import (
    NOT_LOADED,
    Checkpoint,
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    Resolution,
    WriteBatch,
)
from .engine.status import InterruptStatus, NodeStatus
from .models import OPEN_STATUSES, Interrupt, Invocation, NodeRun, Session, SessionEvent

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
    """A node-run transition of a leased execution: no interrupt rows to create or close,
    no agent actions (grants, effects) to write."""
    return (
        batch.lease_owner is not None
        and not batch.resolutions
        and not batch.new_interrupts
        and not store_actions.has_actions(batch)
    )


def _fits_one_statement(batch: WriteBatch) -> bool:
    count = len(batch.node_runs) * len(NODE_RUN_COLUMNS) + len(batch.events) * len(EVENT_COLUMNS)
    return count + 2 * len(batch.consumed | batch.deferred) + 16 <= MAX_PARAMETERS


def _parts(items: Iterable[Any], columns: int) -> list[list[Any]]:
    """`items` in lists small enough for one statement of `columns` values per row."""
    items, size = list(items), MAX_PARAMETERS // columns
    return [items[i : i + size] for i in range(0, len(items), size)]


@functools.cache
def _cast_marks(using: str, model: Any, columns: tuple[str, ...]) -> str:
    connection = connections[using]
    types = {f.column: f.db_type(connection) for f in model._meta.concrete_fields}
    return ", ".join(f"CAST(%s AS {types[c]})" for c in columns)


@functools.lru_cache(maxsize=4096)
def _db_pk(using: str, invocation_id: Any) -> Any:
    """An invocation id as the database takes it (computed on every write of a run)."""
    return Invocation._meta.pk.get_db_prep_value(invocation_id, connections[using])


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _dumps(value: Any) -> str:
    return json.dumps(value)


def _json(value: Any) -> Any:
    # Django hands JSON columns back as text on both backends.
    return json.loads(value) if isinstance(value, str) else value


def _uuid(value: Any) -> str:
    return str(uuid.UUID(str(value)))


def _when(value: Any) -> datetime | None:
    """A stored datetime, aware on every backend (SQLite hands back naive ones)."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else parse_datetime(value)
    if timezone.is_aware(parsed):
        return parsed
    # Naive: UTC with USE_TZ (how Django stores it on SQLite), else the current time zone.
    return timezone.make_aware(parsed, UTC if settings.USE_TZ else None)


def _stored_time(value: datetime | None) -> datetime | None:
    """A datetime as the ORM stores it: naive local time without USE_TZ."""
    if value is not None and not settings.USE_TZ and timezone.is_aware(value):
        return timezone.make_naive(value)
    return value


# Bind parameters per statement, under SQLite's default limit (32,766) and PostgreSQL's
# (65,535), so a wide parallel worker's transition is split into several statements.
MAX_PARAMETERS = 30_000


INVOCATION_READ = ["id", "workflow_name", "status", "input", "output", "error", "session_id"]
NODE_RUN_READ = [
    *("path", "parent_path", "name", "run_id", "status", "input", "output", "route"),
    *("interrupt_ids", "resume_inputs", "attempt", "error"),
]
INTERRUPT_READ = [
    *("id", "invocation_id", "workflow_name", "path", "run_id", "message", "payload"),
    *("response_schema", "timeout_seconds", "on_timeout", "status", "response", "consumed"),
    *("resolved_by_id", "resolved_at", "deadline", "assignees", "quorum", "four_eyes"),
    "deferred",
]
JSON_COLUMNS = {
    *("input", "output", "interrupt_ids", "resume_inputs", "payload", "response_schema"),
    *("on_timeout", "response", "assignees"),
}


def _read_list(columns: list[str]) -> str:
    """Columns to select; JSON ones as text, so every read path decodes them alike."""
    return ", ".join(f"CAST({c} AS text) AS {c}" if c in JSON_COLUMNS else c for c in columns)


INVOCATION_COLUMNS = _read_list(INVOCATION_READ)
NODE_RUN_READ_COLUMNS = _read_list(NODE_RUN_READ)
# What a run needs: a completed node run's input and output stay in the database (the
# output is fetched if a re-running parent reuses it: load_outputs_sync).
NODE_RUN_RUN_COLUMNS = ", ".join(
    f"CASE WHEN status = %s THEN NULL ELSE CAST({c} AS text) END"
    if c in ("input", "output")
    else f"CAST({c} AS text) AS {c}"
    if c in JSON_COLUMNS
    else c
    for c in NODE_RUN_READ
)
INTERRUPT_COLUMNS = _read_list(INTERRUPT_READ)
EVENT_READ_COLUMNS = ", ".join(EVENT_COLUMNS)


OPEN_INTERRUPT = "(status = %s OR (consumed = %s AND status IN (%s, %s)))"
OPEN_INTERRUPT_PARAMS = [InterruptStatus.PENDING, False, *ANSWERED]


def invocation_record(row: tuple) -> InvocationRecord:
    id_, workflow_name, status, input_, output, error, session_id = row
    return InvocationRecord(
        id=_uuid(id_),
        workflow_name=workflow_name,
        status=NodeStatus(status),
        input=_json(input_),
        output=_json(output),
        error=error or None,
        session_id=_uuid(session_id),
    )


def node_run_state(row: tuple, completed_loaded: bool = True) -> tuple[str, NodeRunState]:
    path, parent, name, run_id, status, input_, output, route, ids, resume, attempt, error = row
    left_out = not completed_loaded and status == NodeStatus.COMPLETED
    return path, NodeRunState(
        status=NodeStatus(status),
        run_id=run_id,
        output=NOT_LOADED if left_out else _json(output),
        # Most runs wait on nothing and resumed with nothing: no decoding for those.
        interrupt_ids=set() if ids == "[]" else set(_json(ids)),
        attempt=attempt,
        name=name,
        parent_path=parent,
        input=NOT_LOADED if left_out else _json(input_),
        route=route or None,
        resume_inputs={} if resume == "{}" else dict(_json(resume)),
        error=error or None,
    )


def _checkpoint_from(
    invocation_row: tuple, runs: list[tuple], interrupts: list[tuple], for_run: bool
) -> Checkpoint:
    return Checkpoint(
        invocation=invocation_record(invocation_row),
        node_runs=dict(node_run_state(r, not for_run) for r in runs),
        interrupts={record.id: record for record in map(interrupt_record, interrupts)},
    )


def interrupt_record(row: tuple) -> InterruptRecord:
    (
        id_,
        invocation_id,
        workflow_name,
        path,
        run_id,
        message,
        payload,
        response_schema,
        timeout_seconds,
        on_timeout,
        status,
        response,
        consumed,
        resolved_by_id,
        resolved_at,
        deadline,
        assignees,
        quorum,
        four_eyes,
        deferred,
    ) = row
    return InterruptRecord(
        id=id_,
        invocation_id=_uuid(invocation_id),
        workflow_name=workflow_name,
        path=path,
        run_id=run_id,
        request=RequestInput.from_dict(
            {
                "interrupt_id": id_,
                "message": message,
                "payload": _json(payload),
                "response_schema": _json(response_schema),
                "timeout": timeout_seconds,
                "on_timeout": _json(on_timeout),
                "assignees": _json(assignees),
                "quorum": quorum,
                "four_eyes": bool(four_eyes),
            }
        ),
        status=InterruptStatus(status),
        response=_json(response),
        consumed=bool(consumed),
        deferred=bool(deferred),
        resolved_by=resolved_by_id,
        resolved_at=_when(resolved_at),
        deadline=_when(deadline),
    )


def event_from_row(row: tuple) -> Event:
    (
        invocation_id,
        author,
        path,
        run_id,
        status,
        output,
        route,
        calls,
        responses,
        ids,
        error,
        at,
    ) = row
    return Event(
        invocation_id=_uuid(invocation_id),
        author=author,
        path=path,
        run_id=run_id,
        status=NodeStatus(status) if status else None,
        output=_json(output),
        route=route or None,
        function_calls=[FunctionCall(**c) for c in _json(calls)],
        function_responses=[FunctionResponse(**r) for r in _json(responses)],
        long_running_tool_ids=list(_json(ids)),
        error=error or None,
        timestamp=at,
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
        deadline=_stored_time(record.deadline),
        status=record.status,
        assignees=request["assignees"],
        quorum=request["quorum"],
        four_eyes=request["four_eyes"],
    )


class DjangoStore:
    """Store on the ORM (database alias `using`)."""

    def __init__(
        self, using: str = "default", lease_seconds: float = 60.0, *, inline: bool = False
    ) -> None:
        self.using = using
        self.postgresql = connections[using].vendor == "postgresql"
        self.lease_seconds = lease_seconds
        # The engine's loop runs in this thread (it owns the connection): no thread hops.
        self.inline = inline
        if inline:
            # The loop is busy while a synchronous body runs: a thread renews the lease.
            self.keep_alive = partial(_KEEP_ALIVE.keep_alive, self)

    # -- reads (plain SQL: they sit on the resume path) --------------------------------
    def _select(self, sql: str, params: list[Any], *, lock: bool = False) -> list[tuple]:
        with self._cursor() as cursor:
            cursor.execute(self._locking(sql) if lock else sql, params)
            return cursor.fetchall()

    def _locking(self, sql: str) -> str:
        """`sql` locking the rows it reads, where the database has row locks."""
        connection = connections[self.using]
        if not connection.features.has_select_for_update:
            return sql
        # NO KEY UPDATE: the row locks of this app never block the KEY SHARE locks that
        # inserting an event or an interrupt takes on its invocation.
        no_key = connection.features.has_select_for_no_key_update
        return sql + (" FOR NO KEY UPDATE" if no_key else " FOR UPDATE")

    def load_checkpoint_sync(self, invocation_id: str, *, lock: bool = False) -> Checkpoint | None:
        rows = self._select(
            f"SELECT {INVOCATION_COLUMNS} FROM {INVOCATIONS} WHERE id = %s",
            [self._pk(invocation_id)],
            lock=lock,
        )
        return self._checkpoint(rows[0]) if rows else None

    def _checkpoint(self, invocation_row: tuple, *, for_run: bool = False) -> Checkpoint:
        """The invocation's checkpoint; `for_run`: what a run needs, without the inputs and
        outputs of completed node runs (NOT_LOADED)."""
        (runs_sql, runs_params), interrupts_query = self._checkpoint_queries(
            invocation_row[0], for_run
        )
        runs = self._select(runs_sql, runs_params)
        # An interrupt is created with the node run that raised it: none without runs.
        interrupts = runs and self._select(*interrupts_query)
        return _checkpoint_from(invocation_row, runs, interrupts, for_run)

    def _checkpoint_queries(
        self, invocation_id: Any, for_run: bool
    ) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
        """The node-run and open-interrupt reads of a checkpoint."""
        pk = self._pk(invocation_id)
        if for_run:
            runs = (
                f"SELECT {NODE_RUN_RUN_COLUMNS} FROM {NODE_RUNS} WHERE invocation_id = %s "
                "ORDER BY id",
                [NodeStatus.COMPLETED, NodeStatus.COMPLETED, pk],
            )
        else:
            runs = (
                f"SELECT {NODE_RUN_READ_COLUMNS} FROM {NODE_RUNS} WHERE invocation_id = %s "
                "ORDER BY id",
                [pk],
            )
        interrupts = (
            f"SELECT {INTERRUPT_COLUMNS} FROM {INTERRUPTS} WHERE invocation_id = %s "
            f"AND {OPEN_INTERRUPT} ORDER BY created_at, id",
            [pk, *OPEN_INTERRUPT_PARAMS],
        )
        return runs, interrupts

    def _pipelined(self, statements: list[tuple[str, list[Any]]]) -> list[list[tuple]]:
        """PostgreSQL: run the statements in one round trip (psycopg's pipeline mode), each
        with its own snapshot as if sent one by one; their rows, in order."""
        with self._pipeline(statements) as cursors:
            return [cursor.fetchall() for cursor in cursors]

    @contextlib.contextmanager
    def _pipeline(self, statements: list[tuple[str, list[Any]]]) -> Iterator[list[Any]]:
        """PostgreSQL: send the statements in one round trip (psycopg's pipeline mode; the
        server runs them in order, each as if sent alone) and yield their cursors."""
        import psycopg

        connection = connections[self.using]
        raw_connection = self._raw_connection(connection)
        prepare = bool(hitl_settings.POSTGRES_PREPARED_STATEMENTS)
        cursors = [psycopg.Cursor(raw_connection) for _ in statements]
        try:
            with connection.wrap_database_errors:
                with raw_connection.pipeline():
                    for cursor, (sql, params) in zip(cursors, statements, strict=True):
                        cursor.execute(sql, params, prepare=prepare)
                yield cursors
        finally:
            for cursor in cursors:
                cursor.close()

    def load_outputs_sync(self, invocation_id: str, parent_path: str) -> dict[str, Any]:
        """The outputs of the completed children of the node run at `parent_path`."""
        rows = self._select(
            f"SELECT path, CAST(output AS text) FROM {NODE_RUNS} WHERE invocation_id = %s "
            "AND parent_path = %s AND status = %s",
            [self._pk(invocation_id), parent_path, NodeStatus.COMPLETED],
        )
        return {path: _json(output) for path, output in rows}

    def lock_for_answers_sync(self, interrupt_ids: Iterable[str]) -> dict[str, InterruptRecord]:
        """Lock the invocation that holds these interrupts, then the interrupt rows (the one
        lock order, see lock_invocation_sync), and return them. The invocation is found and
        locked in one statement (when the ids belong to several invocations, a submission
        refused later, each of them in id order); on PostgreSQL both statements go in one
        round trip, run in that order."""
        ids = sorted(set(interrupt_ids))
        if not ids:
            return {}
        owners = (
            self._locking(
                f"SELECT id FROM {INVOCATIONS} WHERE id IN (SELECT invocation_id FROM "
                f"{INTERRUPTS} WHERE id IN ({_marks(len(ids))})) ORDER BY id"
            ),
            ids,
        )
        interrupts = (
            self._locking(
                f"SELECT {INTERRUPT_COLUMNS} FROM {INTERRUPTS} "
                f"WHERE id IN ({_marks(len(ids))}) ORDER BY id"
            ),
            ids,
        )
        if self.postgresql:
            _, rows = self._pipelined([owners, interrupts])
        else:
            self._select(*owners)
            rows = self._select(*interrupts)
        return {record.id: record for record in map(interrupt_record, rows)}

    def read_for_execution_sync(self, invocation_id: str) -> tuple[str, str, int] | None:
        """What a delivery needs before it runs an open invocation: its workflow name and
        version, and its unfinished deliveries, counting this one when it takes over an
        expired lease (a run that never finished). None: not open."""
        now = timezone.now()
        clock, clock_params = self._clock(now)
        pk = self._pk(invocation_id)
        is_open = f"id = %s AND status IN ({_marks(len(OPEN_STATUSES))})"
        take_over = (
            f"UPDATE {INVOCATIONS} SET lease_owner = '', lease_expires_at = NULL, "
            f"unfinished_deliveries = unfinished_deliveries + 1 WHERE {is_open} "
            f"AND lease_owner <> '' AND lease_expires_at < {clock}"
        )
        if self.postgresql:
            # One round trip; the SELECT sees the row as before the UPDATE, hence COALESCE.
            rows = self._select(
                f"WITH taken AS ({take_over} RETURNING unfinished_deliveries) "
                f"SELECT workflow_name, workflow_version, COALESCE((SELECT "
                f"unfinished_deliveries FROM taken), unfinished_deliveries) "
                f"FROM {INVOCATIONS} WHERE {is_open}",
                [pk, *OPEN_STATUSES, *clock_params, pk, *OPEN_STATUSES],
            )
        else:
            with self._cursor() as cursor:
                cursor.execute(take_over, [pk, *OPEN_STATUSES, *clock_params])
            rows = self._select(
                f"SELECT workflow_name, workflow_version, unfinished_deliveries "
                f"FROM {INVOCATIONS} WHERE {is_open}",
                [pk, *OPEN_STATUSES],
            )
        return tuple(rows[0]) if rows else None

    def lock_invocation_sync(self, invocation_id: str) -> None:
        """Lock the invocation row for this transaction: the first lock every write path
        takes (the one lock order), before any of the invocation's interrupt rows."""
        self._select(
            f"SELECT id FROM {INVOCATIONS} WHERE id = %s", [self._pk(invocation_id)], lock=True
        )

    def load_interrupts_sync(
        self, ids: Iterable[str], *, lock: bool = False
    ) -> dict[str, InterruptRecord]:
        ids = sorted(set(ids))
        if not ids:
            return {}
        rows = self._select(
            f"SELECT {INTERRUPT_COLUMNS} FROM {INTERRUPTS} WHERE id IN ({_marks(len(ids))}) "
            "ORDER BY id",
            ids,
            lock=lock,
        )
        return {record.id: record for record in map(interrupt_record, rows)}

    def load_events_sync(self, invocation_id: str) -> list[Event]:
        rows = self._select(
            f"SELECT {EVENT_READ_COLUMNS} FROM {EVENTS} WHERE invocation_id = %s ORDER BY id",
            [self._pk(invocation_id)],
        )
        return [event_from_row(r) for r in rows]

    # -- writes ------------------------------------------------------------------------
    # The per-step path (invocation row, node runs, events, consumed answers) is plain SQL:
    # it runs once per node transition, and the ORM's per-call compilation cost more than
    # the database round trips themselves.

    def commit_sync(self, batch: WriteBatch, *, savepoint: bool = True) -> bool:
        """Apply the batch (see the Store protocol). Inside a caller's transaction the
        batch is a savepoint, so that a refused batch leaves nothing behind and the
        transaction goes on; `savepoint=False` when the caller's transaction ends with
        any error anyway (the services' write transactions)."""
        now = timezone.now()
        connection = connections[self.using]
        waiting = None
        if self.postgresql and _is_step(batch) and _fits_one_statement(batch):
            self._commit_step_postgresql(connection, batch, now)
        else:
            waiting = self._commit_statements(connection, batch, now, savepoint)
        if not batch.release_lease:
            return False
        # A run's last write gave the lease back: did answers arrive while it ran?
        finished = batch.invocation is not None and batch.invocation.status.is_final
        if finished:
            return False
        return waiting if waiting is not None else self._answers_waiting(batch.invocation_id)

    def _commit_statements(
        self, connection: Any, batch: WriteBatch, now: Any, savepoint: bool = True
    ) -> bool | None:
        """The batch in one transaction of several statements. On PostgreSQL they go in one
        round trip (pipelined) with, after a run's last write, the "answers waiting" read
        (a statement of its own, so it sees answers committed while the lease UPDATE
        waited; a later one queues on the invocation row until this commits); that read's
        result is returned (None when not made here)."""
        statements = self._batch_statements(batch, now)
        # Not pipelined when the UPDATE may find no invocation to create it first (an
        # engine Runner's first write): the statements after it need the row.
        pipelined = self.postgresql and (batch.lease_owner is not None or batch.invocation is None)
        ask = (
            pipelined
            and batch.release_lease
            and not (batch.invocation is not None and batch.invocation.status.is_final)
        )
        if ask:
            statements.append((*self._answers_waiting_query(batch.invocation_id), None))
        atomic = transaction.atomic(using=self.using, savepoint=savepoint)
        with atomic:
            if pipelined:
                with self._pipeline([(sql, params) for sql, params, _ in statements]) as cursors:
                    for cursor, (_, _, check) in zip(cursors, statements, strict=True):
                        if check is not None:
                            check(cursor)
                    waiting = bool(cursors[-1].fetchall()) if ask else None
            else:
                with self._cursor() as cursor:
                    for sql, params, check in statements:
                        cursor.execute(sql, params)
                        if check is not None:
                            check(cursor)
                waiting = None
            store_actions.apply(batch, self.using)
            signals.announce(batch, self.using)
        return waiting

    def _batch_statements(
        self, batch: WriteBatch, now: Any
    ) -> list[tuple[str, list[Any], Callable[[Any], None] | None]]:
        """The batch's statements, each with the check of its result (it raises and so
        rolls the transaction back): the lease, pending resolutions, new interrupt ids."""
        statements: list[tuple[str, list[Any], Callable[[Any], None] | None]] = []
        if batch.lease_owner is not None or batch.invocation is not None:

            def written(cursor: Any) -> None:
                if not cursor.rowcount:
                    self._refuse(batch)

            statements.append((*self._invocation_update(batch, now), written))
        for resolution in batch.resolutions:
            check = partial(self._resolved, resolution.interrupt_id)
            statements.append((*self._resolution_update(resolution, now), check))
        for part in _parts(batch.node_runs.items(), len(NODE_RUN_COLUMNS)):
            rows, values = self._node_run_values(batch.invocation_id, part, now)
            sql = (
                f"INSERT INTO {NODE_RUNS} ({', '.join(NODE_RUN_COLUMNS)}) VALUES {rows} "
                f"{NODE_RUN_CONFLICT}"
            )
            statements.append((sql, values, None))
        if batch.new_interrupts:
            statements += self._interrupt_inserts(batch.new_interrupts)
        for part in _parts(batch.events, len(EVENT_COLUMNS)):
            rows, values = self._event_values(batch.invocation_id, part)
            sql = f"INSERT INTO {EVENTS} ({', '.join(EVENT_COLUMNS)}) VALUES {rows}"
            statements.append((sql, values, None))
        if batch.consumed:
            ids = sorted(batch.consumed)
            sql = (
                f"UPDATE {INTERRUPTS} SET consumed = %s WHERE id IN ({_marks(len(ids))}) "
                f"AND status IN (%s, %s)"
            )
            statements.append((sql, [True, *ids, *ANSWERED], None))
        if batch.deferred:
            ids = sorted(batch.deferred)
            sql = (
                f"UPDATE {INTERRUPTS} SET deferred = %s WHERE id IN ({_marks(len(ids))}) "
                f"AND consumed = %s"
            )
            statements.append((sql, [True, *ids, False], None))
        return statements

    def _commit_step_postgresql(self, connection: Any, batch: WriteBatch, now: Any) -> None:
        """One node-run transition as one statement: one round trip, atomic by itself.

        Every write is conditional on the invocation UPDATE (lease held, not cancelled)."""
        parts, params = [], []
        invocation_sql, invocation_params = self._invocation_update(batch, now)
        parts.append(f"inv AS ({invocation_sql} RETURNING id)")
        params += invocation_params
        if batch.node_runs:
            rows, values = self._node_run_values(
                batch.invocation_id, batch.node_runs.items(), now, cast=True
            )
            parts.append(
                f"runs AS (INSERT INTO {NODE_RUNS} ({', '.join(NODE_RUN_COLUMNS)}) "
                f"SELECT * FROM (VALUES {rows}) AS v WHERE EXISTS (SELECT 1 FROM inv) "
                f"{NODE_RUN_CONFLICT})"
            )
            params += values
        if batch.events:
            rows, values = self._event_values(batch.invocation_id, batch.events, cast=True)
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
        if batch.deferred:
            ids = sorted(batch.deferred)
            parts.append(
                f"deferred AS (UPDATE {INTERRUPTS} SET deferred = true "
                f"WHERE id IN ({_marks(len(ids))}) AND consumed = false "
                f"AND EXISTS (SELECT 1 FROM inv))"
            )
            params += ids
        with self._cursor() as cursor:
            cursor.execute(f"WITH {', '.join(parts)} SELECT count(*) FROM inv", params)
            (written,) = cursor.fetchone()
        if not written:
            self._refuse(batch)
        signals.announce(batch, self.using)

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        """A cursor for the store's own statements, on the driver's own cursor (they run on
        every node transition: Django's cursor wrapper costs more than SQLite's work),
        database errors raised as Django's. On PostgreSQL, server-side binding (values
        travel apart from the statement: nothing to quote into its text, and the server
        parses a short statement); with HITL["POSTGRES_PREPARED_STATEMENTS"] each statement
        is also prepared once per connection (the server parses and plans it once)."""
        connection = connections[self.using]
        if connection.vendor == "sqlite":
            raw_connection = self._raw_connection(connection)
            with connection.wrap_database_errors:
                cursor = _QmarkCursor(raw_connection.cursor())
                try:
                    yield cursor
                finally:
                    cursor.close()
            return
        if not self.postgresql:
            with connection.cursor() as cursor:
                yield cursor
            return
        import psycopg

        raw_connection = self._raw_connection(connection)
        with connection.wrap_database_errors, psycopg.Cursor(raw_connection) as raw:
            yield _Prepared(raw) if hitl_settings.POSTGRES_PREPARED_STATEMENTS else raw

    def _raw_connection(self, connection: Any) -> Any:
        """The driver's connection under Django's, ready for the store's own cursors."""
        connection.ensure_connection()
        connection.validate_no_broken_transaction()
        raw_connection = connection.connection
        if (
            self.postgresql
            and hitl_settings.POSTGRES_PREPARED_STATEMENTS
            and raw_connection.prepare_threshold is None
        ):
            # Django turns psycopg's prepared statements off; allow the ones asked for
            # (prepare=True) without preparing anything else on its own.
            raw_connection.prepare_threshold = 2**31
        return raw_connection

    def _pk(self, invocation_id: str) -> Any:
        return _db_pk(self.using, invocation_id)

    def _datetime(self, value: Any) -> Any:
        if self.postgresql and settings.USE_TZ:
            return value  # psycopg adapts datetimes itself
        return connections[self.using].ops.adapt_datetimefield_value(_stored_time(value))

    def _clock(self, now: Any) -> tuple[str, list[Any]]:
        """SQL for the current time. Leases are judged on the database's clock, not on
        each worker's (SQLite is embedded: its clock is this machine's)."""
        if self.postgresql:
            return "clock_timestamp()", []
        return "%s", [self._datetime(now)]

    def _lease_expiry(self, now: Any, seconds: float) -> tuple[str, list[Any]]:
        """SQL for the time a lease taken now for `seconds` expires."""
        if self.postgresql:
            return "clock_timestamp() + %s * interval '1 second'", [float(seconds)]
        return "%s", [self._datetime(now + timedelta(seconds=seconds))]

    def _invocation_update(self, batch: WriteBatch, now: Any) -> tuple[str, list[Any]]:
        """The UPDATE that renews the lease and refuses writes to a cancelled invocation."""
        invocation = batch.invocation
        assignments: list[str] = []
        values: list[Any] = []
        if invocation is not None:
            # updated_at moves with the status only: a step that renews the lease touches
            # no indexed column, so PostgreSQL updates the row in place (HOT).
            assignments += ["updated_at = %s", "status = %s", "output = %s", "error = %s"]
            values += [
                self._datetime(now),
                invocation.status,
                _dumps(invocation.output),
                invocation.error or "",
            ]
            if invocation.status.is_final:
                assignments.append("finished_at = %s")
                values.append(self._datetime(now))
        conditions, arguments = ["id = %s"], [self._pk(batch.invocation_id)]
        if batch.lease_owner is not None:
            # A run writes only while the invocation is open: no write of a run changes a
            # final status (cancelled, or failed by the deadline sweep meanwhile).
            conditions.append(f"status IN ({_marks(len(OPEN_STATUSES))})")
            arguments += OPEN_STATUSES
            if batch.release_lease:
                assignments += ["lease_owner = ''", "lease_expires_at = NULL"]
            else:
                expiry, expiry_params = self._lease_expiry(now, self.lease_seconds)
                assignments.append(f"lease_expires_at = {expiry}")
                values += expiry_params
            conditions.append("lease_owner = %s")
            arguments.append(batch.lease_owner)
        elif invocation is None or invocation.status != NodeStatus.CANCELLED:
            conditions.append("status <> %s")
            arguments.append(NodeStatus.CANCELLED)
        sql = f"UPDATE {INVOCATIONS} SET {', '.join(assignments)} WHERE {' AND '.join(conditions)}"
        return sql, values + arguments

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
        elif status is not None and NodeStatus(status).is_final:
            raise InvocationFinishedError(f"invocation {batch.invocation_id} is {status}")
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

    def _resolution_update(self, resolution: Resolution, now: Any) -> tuple[str, list[Any]]:
        """Close a pending interrupt; RETURNING its id (none: it was not pending)."""
        response = resolution.response
        return (
            f"UPDATE {INTERRUPTS} SET status = %s, response = %s, resolved_by_id = %s, "
            f"resolved_at = %s WHERE id = %s AND status = %s RETURNING id",
            [
                resolution.status,
                None if response is None else _dumps(response),
                resolution.actor,
                self._datetime(resolution.at or now),
                resolution.interrupt_id,
                InterruptStatus.PENDING,
            ],
        )

    def _resolved(self, interrupt_id: str, cursor: Any) -> None:
        """The check of a resolution: InterruptNotPendingError when it closed nothing."""
        if cursor.fetchall():
            return
        current = (
            Interrupt.objects.using(self.using)
            .filter(pk=interrupt_id)
            .values_list("status", flat=True)
            .first()
        )
        raise InterruptNotPendingError(interrupt_id, current or "missing")

    def _node_run_values(
        self,
        invocation_id: str,
        node_runs: Collection[tuple[str, NodeRunState]],
        now: Any,
        cast: bool = False,
    ) -> tuple[str, list[Any]]:
        """`(path, state)` pairs as rows: the marks, and the values."""
        invocation_pk, stamp = self._pk(invocation_id), self._datetime(now)
        values: list[Any] = []
        for path, state in node_runs:
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
        return self._rows(NodeRun, NODE_RUN_COLUMNS, len(node_runs), cast), values

    def _event_values(
        self, invocation_id: str, events: list[Event], cast: bool = False
    ) -> tuple[str, list[Any]]:
        invocation_pk = self._pk(invocation_id)
        values: list[Any] = []
        for event in events:
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
        return self._rows(SessionEvent, EVENT_COLUMNS, len(events), cast), values

    def _rows(self, model: Any, columns: list[str], count: int, cast: bool) -> str:
        """`(%s, ...), ...` for `count` rows; with `cast`, each mark cast to its column's
        type (VALUES inside a SELECT does not take its types from the target table)."""
        marks = _cast_marks(self.using, model, tuple(columns)) if cast else None
        return ", ".join([f"({marks or _marks(len(columns))})"] * count)

    def _interrupt_inserts(
        self, records: list[InterruptRecord]
    ) -> list[tuple[str, list[Any], Callable[[Any], None]]]:
        """Insert the interrupt rows; the last check raises DuplicateInterruptError for an
        id held already (by any node run), and the transaction then writes nothing."""
        connection = connections[self.using]
        fields = Interrupt._meta.concrete_fields
        columns = ", ".join(f.column for f in fields)
        inserted: set[str] = set()
        parts = _parts(records, len(fields))
        statements = []
        for index, part in enumerate(parts):
            values = []
            for row in map(interrupt_row, part):
                values += [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields]
            rows = ", ".join([f"({_marks(len(fields))})"] * len(part))
            sql = (
                f"INSERT INTO {INTERRUPTS} ({columns}) VALUES {rows} "
                "ON CONFLICT (id) DO NOTHING RETURNING id"
            )

            def check(cursor: Any, last: bool = index == len(parts) - 1) -> None:
                inserted.update(r[0] for r in cursor.fetchall())
                taken = [r.id for r in records if r.id not in inserted]
                if last and taken:
                    held = Interrupt.objects.using(self.using).filter(pk=taken[0]).first()
                    path = held.path if held else "another node run"
                    raise DuplicateInterruptError(taken[0], path)

            statements.append((sql, values, check))
        return statements

    # -- lease (single statements: each is its own transaction) --------------------------
    def acquire_lease_sync(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        now = timezone.now()
        expiry, expiry_params = self._lease_expiry(now, ttl)
        clock, clock_params = self._clock(now)
        take = (
            f"UPDATE {INVOCATIONS} SET lease_owner = %s, lease_expires_at = {expiry}, "
            # A run took it: a later stall may be recovered again at once.
            f"recovery_enqueued_at = NULL WHERE id = %s AND (lease_owner = '' OR lease_owner = %s "
            f"OR lease_expires_at < {clock}) RETURNING {INVOCATION_COLUMNS}"
        )
        params = [owner, *expiry_params, self._pk(invocation_id), owner, *clock_params]
        # Take the lease, then read the checkpoint in statements of their own. Not in one
        # statement (a CTE): on PostgreSQL, when the UPDATE waits for the previous holder's
        # last write, it sees that write once committed, but the rest of the statement keeps
        # the snapshot from before it: stale node runs and answers already consumed, which
        # the new run would apply a second time.
        if self.postgresql:
            # Separate statements in one round trip: each still reads after the UPDATE.
            reads = self._checkpoint_queries(invocation_id, for_run=True)
            taken, runs, interrupts = self._pipelined([(take, params), *reads])
            if taken:
                return _checkpoint_from(taken[0], runs, interrupts, True)
        else:
            with self._cursor() as cursor:
                cursor.execute(take, params)
                row = cursor.fetchone()
            if row is not None:
                return self._checkpoint(row, for_run=True)
        if not Invocation.objects.using(self.using).filter(pk=invocation_id).exists():
            raise InvocationNotFoundError(invocation_id)
        return None

    def renew_lease_sync(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """Extend `owner`'s lease by `ttl` from now. False: another run holds the lease, or
        the invocation is finished; None: the row is not visible here (not committed yet)."""
        now = timezone.now()
        expiry, expiry_params = self._lease_expiry(now, ttl)
        with self._cursor() as cursor:
            cursor.execute(
                f"UPDATE {INVOCATIONS} SET lease_expires_at = {expiry} "
                f"WHERE id = %s AND lease_owner = %s AND status IN "
                f"({_marks(len(OPEN_STATUSES))})",
                [*expiry_params, self._pk(invocation_id), owner, *OPEN_STATUSES],
            )
            if cursor.rowcount:
                return True
        visible = Invocation.objects.using(self.using).filter(pk=invocation_id).exists()
        return False if visible else None

    def release_lease_sync(self, invocation_id: str, owner: str) -> bool:
        with self._cursor() as cursor:
            cursor.execute(
                f"UPDATE {INVOCATIONS} SET lease_owner = '', lease_expires_at = NULL "
                f"WHERE id = %s AND lease_owner = %s RETURNING status",
                [self._pk(invocation_id), owner],
            )
            row = cursor.fetchone()
        return row is not None and row[0] in OPEN_STATUSES and self._answers_waiting(invocation_id)

    def _answers_waiting(self, invocation_id: str) -> bool:
        """Whether answers wait that no pass has seen."""
        return bool(self._select(*self._answers_waiting_query(invocation_id)))

    def _answers_waiting_query(self, invocation_id: str) -> tuple[str, list[Any]]:
        return (
            f"SELECT 1 FROM {INTERRUPTS} WHERE invocation_id = %s AND consumed = %s "
            f"AND deferred = %s AND status IN (%s, %s) LIMIT 1",
            [self._pk(invocation_id), False, False, *ANSWERED],
        )

    async def commit_then_call(
        self, batch: WriteBatch, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A node's checkpoint and the start of its body, in one trip to this thread."""

        def commit_then_call() -> Any:
            self.commit_sync(batch)
            return func(*args, **kwargs)

        return await self._call(commit_then_call)

    async def run_sync(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Synchronous node code runs in the thread that owns the database connection, so
        node bodies may use the ORM (and share the caller's transaction)."""
        return await self._call(partial(func, *args, **kwargs))

    # -- agent actions: grants and effects (store_actions) ------------------------------
    def find_grants_sync(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: Any
    ) -> list[Any]:
        return store_actions.find_grants(self.using, workflow_name, node_name, scopes, now)

    def load_effects_sync(self, invocation_id: str, path: str) -> dict[str, Any]:
        return store_actions.load_effects(self.using, self._pk(invocation_id), path)

    async def find_grants(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: Any
    ) -> list[Any]:
        return await self._call(self.find_grants_sync, workflow_name, node_name, list(scopes), now)

    async def record_grant(self, grant: Any) -> None:
        await self._call(store_actions.record_grant, self.using, grant)

    async def revoke_grant(self, grant_id: str, at: Any) -> Any:
        return await self._call(store_actions.revoke_grant, self.using, grant_id, at)

    async def load_effects(self, invocation_id: str, path: str) -> dict[str, Any]:
        return await self._call(self.load_effects_sync, invocation_id, path)

    # -- the async protocol the engine awaits --------------------------------------------
    async def load_checkpoint(self, invocation_id: str) -> Checkpoint | None:
        return await self._call(self.load_checkpoint_sync, invocation_id)

    async def load_interrupts(self, ids: Iterable[str]) -> dict[str, InterruptRecord]:
        return await self._call(self.load_interrupts_sync, list(ids))

    async def load_events(self, invocation_id: str) -> list[Event]:
        return await self._call(self.load_events_sync, invocation_id)

    async def load_outputs(self, invocation_id: str, parent_path: str) -> dict[str, Any]:
        return await self._call(self.load_outputs_sync, invocation_id, parent_path)

    async def commit(self, batch: WriteBatch) -> bool:
        return await self._call(self.commit_sync, batch)

    async def acquire_lease(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        return await self._call(self.acquire_lease_sync, invocation_id, owner, ttl)

    async def release_lease(self, invocation_id: str, owner: str) -> bool:
        return await self._call(self.release_lease_sync, invocation_id, owner)

    async def renew_lease(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """The heartbeat: on a connection of its own, in a thread of its own, so it
        renews the lease while a synchronous node body holds the caller's thread."""
        return await sync_to_async(self.renew_lease_apart, thread_sensitive=False)(
            invocation_id, owner, ttl
        )

    def renew_lease_apart(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """renew_lease_sync from a thread other than the run's, closing its connection."""
        try:
            return self.renew_lease_sync(invocation_id, owner, ttl)
        finally:
            connections[self.using].close()

    async def _call(self, func: Any, *args: Any) -> Any:
        if self.inline:
            return _outside_loop(func, *args)
        return await _in_caller_thread(func, *args)


@functools.lru_cache(maxsize=512)
def _qmarks(sql: str) -> str:
    """The store's SQL (format-style marks, as Django's cursors take) in sqlite3's style."""
    return sql.replace("%s", "?")


class _QmarkCursor:
    """An sqlite3 cursor that takes the store's format-style marks."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = ()) -> None:
        self._cursor.execute(_qmarks(sql), params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Prepared:
    """A psycopg cursor whose every execute is a prepared statement."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = None) -> None:
        self._cursor.execute(sql, params, prepare=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


async def _in_caller_thread(func: Any, *args: Any) -> Any:
    return await sync_to_async(partial(func, *args), thread_sensitive=True)()


def _outside_loop(func: Any, *args: Any) -> Any:
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


class _KeepAlive:
    """One thread per process renews the leases of the runs whose loop a synchronous
    node body may block (inline stores): each every third of its length, on the thread's
    own connection. A lease found lost calls the run's `on_lost` (from this thread)."""

    def __init__(self) -> None:
        self._leases: dict[str, list[Any]] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        # When the thread next looks at the leases (it is woken only for an earlier one:
        # waking it costs the running invocation a thread switch).
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
        entry = [store, invocation_id, ttl, time.monotonic() + ttl / 3, on_lost]
        with self._changed:
            self._leases[owner] = entry
            if self._thread is None or not self._thread.is_alive():
                self._wakes_at = 0.0
                self._thread = threading.Thread(
                    target=self._run, name="hitl-lease-keep-alive", daemon=True
                )
                self._thread.start()
            elif entry[3] < self._wakes_at:
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
                due = [(o, e) for o, e in self._leases.items() if e[3] <= now]
                if not due:
                    self._wakes_at = min((e[3] for e in self._leases.values()), default=now + 60)
                    self._changed.wait(self._wakes_at - now)
                    self._wakes_at = 0.0
                    continue
                self._wakes_at = 0.0
            for owner, (store, invocation_id, ttl, _, on_lost) in due:
                try:
                    held = store.renew_lease_apart(invocation_id, owner, ttl)
                except Exception:  # cannot tell now (a busy database): ask at the next beat
                    held = None
                with self._changed:
                    entry = self._leases.get(owner)
                    if entry is None:
                        continue  # the run ended meanwhile
                    entry[3] = time.monotonic() + ttl / 3
                    if held is False:
                        del self._leases[owner]
                if held is False:
                    with contextlib.suppress(Exception):  # its loop is gone: the run ended
                        on_lost()


_KEEP_ALIVE = _KeepAlive()
