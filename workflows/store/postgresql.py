"""The store on PostgreSQL (psycopg 3): what differs from the portable dialect.

Fewer round trips: a node-run transition is one statement (one round trip instead of
five), the execution read is one, and statements that go together are pipelined
(psycopg's pipeline mode: one round trip, the server runs them in order, each as if sent
alone). A round trip costs 0.15-0.2 ms on the benchmark machine (docs/performance.md,
"The store's choices, measured")."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections

from ..conf import hitl_settings
from ..engine.state import WriteBatch
from ..models import NodeRun, SessionEvent
from . import functions
from .actions import has_actions
from .dialect import Checked, Dialect
from .rows import (
    EVENT_COLUMNS,
    NODE_RUN_COLUMNS,
    dumps,
    event_items,
    event_values,
    node_run_items,
    node_run_values,
)
from .statements import (
    INSERT_EVENTS,
    INSERT_NODE_RUNS,
    MAX_PARAMETERS,
    NODE_RUN_CONFLICT,
    Statement,
    execution_facts,
    invocation_update,
    mark_consumed,
    mark_deferred,
    take_over_expired,
    value_rows,
)

# Conditions a statement of the one-statement step on the invocation UPDATE (`inv`).
IF_WRITTEN = "EXISTS (SELECT 1 FROM inv)"


@functools.cache
def _cast_marks(using: str, model: Any, columns: tuple[str, ...]) -> str:
    """A row's marks, each cast to its column's type (VALUES inside a SELECT does not take
    its types from the target table)."""
    types = {f.column: f.db_type(connections[using]) for f in model._meta.concrete_fields}
    return ", ".join(f"CAST(%s AS {types[c]})" for c in columns)


def _is_step(batch: WriteBatch) -> bool:
    """A node-run transition of a leased execution: no interrupt rows to create or close,
    no grants or effects to write."""
    return (
        batch.lease_owner is not None
        and not batch.resolutions
        and not batch.new_interrupts
        and not has_actions(batch)
    )


def _fits_one_statement(batch: WriteBatch) -> bool:
    count = len(batch.node_runs) * len(NODE_RUN_COLUMNS) + len(batch.events) * len(EVENT_COLUMNS)
    return count + 2 * len(batch.consumed | batch.deferred) + 16 <= MAX_PARAMETERS


class _Prepared:
    """A psycopg cursor whose every execute is a prepared statement."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = None) -> None:
        self._cursor.execute(sql, params, prepare=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class PostgreSQLDialect(Dialect):
    pipelines = True

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """psycopg's own cursor (through Django's a node transition takes about 200,000
        more instructions: docs/performance.md), with server-side binding: values travel
        apart from the statement, nothing is quoted into its text, and the server parses a
        short statement. With
        HITL["POSTGRES_PREPARED_STATEMENTS"] each statement is also prepared once per
        connection (the server parses and plans it once). Errors raised as Django's."""
        raw_connection = self.raw_connection()
        with connections[self.using].wrap_database_errors, psycopg.Cursor(raw_connection) as raw:
            yield _Prepared(raw) if hitl_settings.POSTGRES_PREPARED_STATEMENTS else raw

    def raw_connection(self) -> Any:
        raw_connection = super().raw_connection()
        if hitl_settings.POSTGRES_PREPARED_STATEMENTS and raw_connection.prepare_threshold is None:
            # Django turns psycopg's prepared statements off; allow the ones asked for
            # (prepare=True) without preparing anything else on its own.
            raw_connection.prepare_threshold = 2**31
        return raw_connection

    @contextlib.contextmanager
    def pipeline(self, statements: list[Statement]) -> Iterator[list[Any]]:
        """Send the statements in one round trip and yield their cursors."""
        raw_connection = self.raw_connection()
        prepare = bool(hitl_settings.POSTGRES_PREPARED_STATEMENTS)
        cursors = [psycopg.Cursor(raw_connection) for _ in statements]
        try:
            with connections[self.using].wrap_database_errors:
                with raw_connection.pipeline():
                    for cursor, (sql, params) in zip(cursors, statements, strict=True):
                        cursor.execute(sql, params, prepare=prepare)
                yield cursors
        finally:
            for cursor in cursors:
                cursor.close()

    def select_each(self, statements: list[Statement]) -> list[list[tuple]]:
        """In one round trip, each statement with its own snapshot as if sent alone."""
        with self.pipeline(statements) as cursors:
            return [cursor.fetchall() for cursor in cursors]

    def run_checked(self, statements: list[Checked], in_one_trip: bool = False) -> None:
        if not in_one_trip:
            return super().run_checked(statements)
        with self.pipeline([(sql, params) for sql, params, _ in statements]) as cursors:
            for cursor, (_, _, check) in zip(cursors, statements, strict=True):
                if check is not None:
                    check(cursor)
        return None

    def locking(self, sql: str) -> str:
        # NO KEY UPDATE: the row locks of this app never block the KEY SHARE locks that
        # inserting an event or an interrupt takes on its invocation.
        return sql + " FOR NO KEY UPDATE"

    def adapt_datetime(self, value: datetime) -> Any:
        if settings.USE_TZ:
            return value  # psycopg adapts aware datetimes itself
        return super().adapt_datetime(value)

    def clock(self, now: datetime) -> Statement:
        return "clock_timestamp()", []

    def lease_expiry(self, now: datetime, seconds: float) -> Statement:
        return "clock_timestamp() + %s * interval '1 second'", [float(seconds)]

    def step(self, batch: WriteBatch, now: datetime, lease_seconds: float) -> Statement | None:
        """A node-run transition as one statement: one round trip, atomic by itself.
        Every write in it is conditional on the invocation UPDATE (lease held, open).
        The store's function when installed (functions.py: its plans kept by the
        server), else a CTE."""
        if not _is_step(batch):
            return None
        if functions.installed(self.using):
            return self._function_step(batch, now, lease_seconds)
        if not _fits_one_statement(batch):
            return None
        pk = self.pk(batch.invocation_id)
        invocation_sql, params = invocation_update(batch, pk, now, lease_seconds, self)
        parts = [f"inv AS ({invocation_sql} RETURNING id)"]
        if batch.node_runs:
            marks = _cast_marks(self.using, NodeRun, tuple(NODE_RUN_COLUMNS))
            rows = value_rows(len(batch.node_runs), marks)
            parts.append(
                f"runs AS ({INSERT_NODE_RUNS} SELECT * FROM (VALUES {rows}) AS v "
                f"WHERE {IF_WRITTEN} {NODE_RUN_CONFLICT})"
            )
            params += node_run_values(pk, batch.node_runs.items(), self.adapt_datetime(now))
        if batch.events:
            marks = _cast_marks(self.using, SessionEvent, tuple(EVENT_COLUMNS))
            rows = value_rows(len(batch.events), marks)
            parts.append(
                f"events AS ({INSERT_EVENTS} SELECT * FROM (VALUES {rows}) AS v WHERE {IF_WRITTEN})"
            )
            params += event_values(pk, batch.events)
        if batch.consumed:
            sql, values = mark_consumed(sorted(batch.consumed))
            parts.append(f"consumed AS ({sql} AND {IF_WRITTEN})")
            params += values
        if batch.deferred:
            sql, values = mark_deferred(sorted(batch.deferred))
            parts.append(f"deferred AS ({sql} AND {IF_WRITTEN})")
            params += values
        return f"WITH {', '.join(parts)} SELECT count(*) FROM inv", params

    def _function_step(self, batch: WriteBatch, now: datetime, lease_seconds: float) -> Statement:
        """The call of the store's function: the invocation's id, the time, and the rest
        of the batch as one JSON document (one json.dumps; functions.py)."""
        invocation = batch.invocation
        document: dict[str, Any] = {
            "owner": batch.lease_owner,
            "seconds": float(lease_seconds),
            "release": batch.release_lease,
            "set": invocation is not None,
            "runs": node_run_items(batch.node_runs.items()),
            "events": event_items(batch.events),
            "consumed": sorted(batch.consumed),
            "deferred": sorted(batch.deferred),
            "durable": self._durable(batch),
        }
        if invocation is not None:
            document["status"] = invocation.status
            document["output"] = invocation.output
            document["error"] = invocation.error or ""
            document["final"] = invocation.status.is_final
        params = [self.pk(batch.invocation_id), self.adapt_datetime(now), dumps(document)]
        return functions.call(self.using), params

    def _durable(self, batch: WriteBatch) -> bool:
        """Whether this step's commit waits for the disk: always but with
        HITL["DURABILITY"] "async" in the middle of a pass, in a transaction of its own
        (a caller's transaction keeps the durability it has)."""
        if hitl_settings.DURABILITY != "async" or batch.release_lease:
            return True
        if batch.invocation is not None and batch.invocation.status.is_final:
            return True
        return connections[self.using].in_atomic_block

    def take_lease(
        self, take: Statement, reads: tuple[Statement, Statement]
    ) -> tuple[tuple, list, list] | None:
        # Not one statement (a CTE): when the UPDATE waits for the previous holder's last
        # write, it sees that write once committed, but the rest of a statement keeps the
        # snapshot from before it (stale node runs, answers already consumed, which the
        # new run would apply again). Separate statements in one round trip each read
        # after the UPDATE.
        taken, runs, interrupts = self.select_each([take, *reads])
        return (taken[0], runs, interrupts) if taken else None

    def read_for_execution(self, pk: Any, now: datetime) -> tuple | None:
        """One round trip; the SELECT sees the row as before the UPDATE, hence COALESCE."""
        take_over, take_over_params = take_over_expired(pk, self.clock(now))
        deliveries = "COALESCE((SELECT unfinished_deliveries FROM taken), unfinished_deliveries)"
        read, read_params = execution_facts(pk, deliveries)
        rows = self.select(
            (
                f"WITH taken AS ({take_over} RETURNING unfinished_deliveries) {read}",
                take_over_params + read_params,
            )
        )
        return tuple(rows[0]) if rows else None
