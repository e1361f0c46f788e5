"""The store's portable SQL: select lists as named constants and builders returning
`(sql, params)`, in format-style marks (`%s`, as Django's cursors take them).

What differs between databases comes in from the dialect (dialect.py): how a datetime is
passed, the clock leases are judged by, the locking clause; the dialects' own statements
(PostgreSQL's one-statement step and execution read) are built from these."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any, Protocol

from ..engine.events import Event
from ..engine.state import NodeRunState, Resolution, WriteBatch
from ..engine.status import InterruptStatus, NodeStatus
from ..models import OPEN_STATUSES
from .rows import (
    ANSWERED,
    EVENT_COLUMNS,
    EVENT_READ,
    EVENTS,
    INTERRUPT_READ,
    INTERRUPTS,
    INVOCATION_READ,
    INVOCATIONS,
    JSON_COLUMNS,
    NODE_RUN_COLUMNS,
    NODE_RUN_READ,
    NODE_RUNS,
    dumps,
    event_values,
    node_run_values,
)

Statement = tuple[str, list[Any]]

# Bind parameters per statement, under SQLite's default limit (32,766) and PostgreSQL's
# (65,535), so a wide parallel worker's transition is split into several statements.
MAX_PARAMETERS = 30_000


class Clock(Protocol):
    """The dialect's part in the statements that write times."""

    def adapt_datetime(self, value: datetime) -> Any:
        """`value` as the database takes it as a parameter."""

    def clock(self, now: datetime) -> Statement:
        """SQL for the current time, by which leases are judged."""

    def lease_expiry(self, now: datetime, seconds: float) -> Statement:
        """SQL for the time a lease taken now for `seconds` expires."""


def marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def value_rows(count: int, row_marks: str) -> str:
    """`(marks), ...` for `count` rows."""
    return ", ".join([f"({row_marks})"] * count)


def parts(items: Iterable[Any], columns: int) -> list[list[Any]]:
    """`items` in lists small enough for one statement of `columns` values per row."""
    items, size = list(items), MAX_PARAMETERS // columns
    return [items[i : i + size] for i in range(0, len(items), size)]


def read_list(table: str, columns: list[str]) -> str:
    """Columns to select; JSON ones as text, so every read path decodes them alike."""
    json_columns = JSON_COLUMNS[table]
    return ", ".join(f"CAST({c} AS text) AS {c}" if c in json_columns else c for c in columns)


INVOCATION_SELECT = read_list(INVOCATIONS, INVOCATION_READ)
NODE_RUN_SELECT = read_list(NODE_RUNS, NODE_RUN_READ)
# What a run needs: a completed node run's input and output stay in the database (the
# output is fetched if a re-running parent reuses it: completed_outputs); for a 1 MB
# input through a 10-node chain a lease loads 2 MB instead of 22 (docs/performance.md).
# Its params: COMPLETED twice.
NODE_RUN_RUN_SELECT = ", ".join(
    f"CASE WHEN status = %s THEN NULL ELSE CAST({c} AS text) END"
    if c in ("input", "output")
    else f"CAST({c} AS text) AS {c}"
    if c in JSON_COLUMNS[NODE_RUNS]
    else c
    for c in NODE_RUN_READ
)
INTERRUPT_SELECT = read_list(INTERRUPTS, INTERRUPT_READ)
EVENT_SELECT = read_list(EVENTS, EVENT_READ)

IS_OPEN = f"status IN ({marks(len(OPEN_STATUSES))})"
OPEN_INTERRUPT = "(status = %s OR (consumed = %s AND status IN (%s, %s)))"
OPEN_INTERRUPT_PARAMS = [InterruptStatus.PENDING, False, *ANSWERED]
NODE_RUN_CONFLICT = "ON CONFLICT (invocation_id, path) DO UPDATE SET " + ", ".join(
    f"{c} = EXCLUDED.{c}" for c in NODE_RUN_COLUMNS[2:] if c != "created_at"
)
INSERT_NODE_RUNS = f"INSERT INTO {NODE_RUNS} ({', '.join(NODE_RUN_COLUMNS)})"
INSERT_EVENTS = f"INSERT INTO {EVENTS} ({', '.join(EVENT_COLUMNS)})"


# -- reads ---------------------------------------------------------------------------------
def invocation(pk: Any) -> Statement:
    return f"SELECT {INVOCATION_SELECT} FROM {INVOCATIONS} WHERE id = %s", [pk]


def invocation_key(pk: Any) -> Statement:
    """The invocation's id: the statement that locks its row."""
    return f"SELECT id FROM {INVOCATIONS} WHERE id = %s", [pk]


def node_runs(pk: Any, for_run: bool) -> Statement:
    """The invocation's node runs; `for_run`: without completed ones' inputs and outputs."""
    if for_run:
        return (
            f"SELECT {NODE_RUN_RUN_SELECT} FROM {NODE_RUNS} WHERE invocation_id = %s ORDER BY id",
            [NodeStatus.COMPLETED, NodeStatus.COMPLETED, pk],
        )
    return f"SELECT {NODE_RUN_SELECT} FROM {NODE_RUNS} WHERE invocation_id = %s ORDER BY id", [pk]


def open_interrupts(pk: Any) -> Statement:
    return (
        f"SELECT {INTERRUPT_SELECT} FROM {INTERRUPTS} WHERE invocation_id = %s "
        f"AND {OPEN_INTERRUPT} ORDER BY created_at, id",
        [pk, *OPEN_INTERRUPT_PARAMS],
    )


def completed_outputs(pk: Any, parent_path: str) -> Statement:
    return (
        f"SELECT path, CAST(output AS text) FROM {NODE_RUNS} WHERE invocation_id = %s "
        "AND parent_path = %s AND status = %s",
        [pk, parent_path, NodeStatus.COMPLETED],
    )


def interrupts(ids: list[str]) -> Statement:
    return (
        f"SELECT {INTERRUPT_SELECT} FROM {INTERRUPTS} WHERE id IN ({marks(len(ids))}) ORDER BY id",
        ids,
    )


def invocation_interrupts(pk: Any) -> Statement:
    """Every question of the invocation, whatever its status (what a rewind reads)."""
    return (
        f"SELECT {INTERRUPT_SELECT} FROM {INTERRUPTS} WHERE invocation_id = %s "
        "ORDER BY created_at, id",
        [pk],
    )


def invocations_holding(ids: list[str]) -> Statement:
    """The ids of the invocations that hold these interrupts, in id order."""
    return (
        f"SELECT id FROM {INVOCATIONS} WHERE id IN (SELECT invocation_id FROM {INTERRUPTS} "
        f"WHERE id IN ({marks(len(ids))})) ORDER BY id",
        ids,
    )


def events(pk: Any) -> Statement:
    return f"SELECT {EVENT_SELECT} FROM {EVENTS} WHERE invocation_id = %s ORDER BY id", [pk]


def answers_waiting(pk: Any) -> Statement:
    """A row when answers wait that no pass has seen."""
    return (
        f"SELECT 1 FROM {INTERRUPTS} WHERE invocation_id = %s AND consumed = %s "
        f"AND deferred = %s AND status IN (%s, %s) LIMIT 1",
        [pk, False, False, *ANSWERED],
    )


def take_over_expired(pk: Any, clock: Statement) -> Statement:
    """Free an open invocation's expired lease (a run that never finished), counting the
    delivery that takes it over."""
    now, now_params = clock
    return (
        f"UPDATE {INVOCATIONS} SET lease_owner = '', lease_expires_at = NULL, "
        f"unfinished_deliveries = unfinished_deliveries + 1 WHERE id = %s AND {IS_OPEN} "
        f"AND lease_owner <> '' AND lease_expires_at < {now}",
        [pk, *OPEN_STATUSES, *now_params],
    )


def execution_facts(pk: Any, deliveries: str = "unfinished_deliveries") -> Statement:
    """An open invocation's workflow name and version and its unfinished deliveries."""
    return (
        f"SELECT workflow_name, workflow_version, {deliveries} FROM {INVOCATIONS} "
        f"WHERE id = %s AND {IS_OPEN}",
        [pk, *OPEN_STATUSES],
    )


# -- writes --------------------------------------------------------------------------------
def invocation_update(
    batch: WriteBatch, pk: Any, now: datetime, lease_seconds: float, time: Clock
) -> Statement:
    """The UPDATE that renews the lease and refuses writes to a cancelled invocation."""
    invocation = batch.invocation
    assignments: list[str] = []
    values: list[Any] = []
    if invocation is not None:
        # updated_at moves with the status only: a step that renews the lease touches
        # no indexed column, so PostgreSQL updates the row in place (HOT: 100 of the 102
        # UPDATEs of a 100-node chain, docs/performance.md).
        assignments += ["updated_at = %s", "status = %s", "output = %s", "error = %s"]
        values += [
            time.adapt_datetime(now),
            invocation.status,
            dumps(invocation.output),
            invocation.error or "",
        ]
        if invocation.status.is_final:
            assignments.append("finished_at = %s")
            values.append(time.adapt_datetime(now))
    conditions, arguments = ["id = %s"], [pk]
    if batch.lease_owner is not None:
        # A run writes only while the invocation is open: no write of a run changes a
        # final status (cancelled, or failed by the deadline sweep meanwhile).
        conditions.append(IS_OPEN)
        arguments += OPEN_STATUSES
        if batch.release_lease:
            assignments += ["lease_owner = ''", "lease_expires_at = NULL"]
        else:
            expiry, expiry_params = time.lease_expiry(now, lease_seconds)
            assignments.append(f"lease_expires_at = {expiry}")
            values += expiry_params
        conditions.append("lease_owner = %s")
        arguments.append(batch.lease_owner)
    elif invocation is None or invocation.status != NodeStatus.CANCELLED:
        conditions.append("status <> %s")
        arguments.append(NodeStatus.CANCELLED)
    sql = f"UPDATE {INVOCATIONS} SET {', '.join(assignments)} WHERE {' AND '.join(conditions)}"
    return sql, values + arguments


def resolution_update(resolution: Resolution, now: datetime, time: Clock) -> Statement:
    """Close a pending interrupt; RETURNING its id (none: it was not pending)."""
    response = resolution.response
    return (
        f"UPDATE {INTERRUPTS} SET status = %s, response = %s, resolved_by_id = %s, "
        f"resolved_at = %s WHERE id = %s AND status = %s RETURNING id",
        [
            resolution.status,
            None if response is None else dumps(response),
            resolution.actor,
            time.adapt_datetime(resolution.at or now),
            resolution.interrupt_id,
            InterruptStatus.PENDING,
        ],
    )


@functools.lru_cache(maxsize=64)
def _node_run_upsert(count: int) -> str:
    """The upsert of `count` node runs, built once per count (most transitions write one)."""
    rows = value_rows(count, marks(len(NODE_RUN_COLUMNS)))
    return f"{INSERT_NODE_RUNS} VALUES {rows} {NODE_RUN_CONFLICT}"


@functools.lru_cache(maxsize=64)
def _event_insert(count: int) -> str:
    return f"{INSERT_EVENTS} VALUES {value_rows(count, marks(len(EVENT_COLUMNS)))}"


def node_run_upsert(
    pk: Any, node_runs: Collection[tuple[str, NodeRunState]], stamp: Any
) -> Statement:
    return _node_run_upsert(len(node_runs)), node_run_values(pk, node_runs, stamp)


def event_insert(pk: Any, events: list[Event]) -> Statement:
    return _event_insert(len(events)), event_values(pk, events)


def mark_consumed(ids: list[str]) -> Statement:
    """Mark answered interrupts consumed (applied by their node run)."""
    return (
        f"UPDATE {INTERRUPTS} SET consumed = %s WHERE id IN ({marks(len(ids))}) "
        "AND status IN (%s, %s)",
        [True, *ids, *ANSWERED],
    )


def mark_deferred(ids: list[str]) -> Statement:
    """Mark unconsumed answers seen by a pass that left them for later."""
    return (
        f"UPDATE {INTERRUPTS} SET deferred = %s WHERE id IN ({marks(len(ids))}) AND consumed = %s",
        [True, *ids, False],
    )


def interrupt_insert(columns: list[str], count: int) -> str:
    """Insert `count` interrupt rows, RETURNING the ids inserted. An id held already is
    left alone, unless a rewind superseded it (DESIGN 3.8): that question is asked again,
    its row reopened as new with the round after its last."""
    rows = value_rows(count, marks(len(columns)))
    reopened = ", ".join(
        f"{c} = {INTERRUPTS}.{c} + 1" if c == "round" else f"{c} = excluded.{c}"
        for c in columns
        if c != "id"
    )
    return (
        f"INSERT INTO {INTERRUPTS} ({', '.join(columns)}) VALUES {rows} "
        f"ON CONFLICT (id) DO UPDATE SET {reopened} "
        f"WHERE {INTERRUPTS}.status = '{InterruptStatus.SUPERSEDED.value}' RETURNING id"
    )


# -- lease (single statements: each is its own transaction) --------------------------------
def take_lease(pk: Any, owner: str, expiry: Statement, clock: Statement) -> Statement:
    """Take the lease when free, expired or already `owner`'s; RETURNING the invocation."""
    (until, until_params), (now, now_params) = expiry, clock
    return (
        f"UPDATE {INVOCATIONS} SET lease_owner = %s, lease_expires_at = {until}, "
        # A run took it: a later stall may be recovered again at once.
        f"recovery_enqueued_at = NULL WHERE id = %s AND (lease_owner = '' OR lease_owner = %s "
        f"OR lease_expires_at < {now}) RETURNING {INVOCATION_SELECT}",
        [owner, *until_params, pk, owner, *now_params],
    )


def take_free_lease(pk: Any, owner: str, expiry: Statement) -> Statement:
    """Take the lease of an open invocation that no run holds and none left unfinished
    (a run about to start in this process, in the transaction that gave it work);
    RETURNING the invocation and its workflow version."""
    until, until_params = expiry
    return (
        f"UPDATE {INVOCATIONS} SET lease_owner = %s, lease_expires_at = {until}, "
        f"recovery_enqueued_at = NULL WHERE id = %s AND lease_owner = '' "
        f"AND unfinished_deliveries = 0 AND {IS_OPEN} "
        f"RETURNING {INVOCATION_SELECT}, workflow_version",
        [owner, *until_params, pk, *OPEN_STATUSES],
    )


def renew_lease(pk: Any, owner: str, expiry: Statement) -> Statement:
    until, until_params = expiry
    return (
        f"UPDATE {INVOCATIONS} SET lease_expires_at = {until} "
        f"WHERE id = %s AND lease_owner = %s AND {IS_OPEN}",
        [*until_params, pk, owner, *OPEN_STATUSES],
    )


def release_lease(pk: Any, owner: str) -> Statement:
    return (
        f"UPDATE {INVOCATIONS} SET lease_owner = '', lease_expires_at = NULL "
        f"WHERE id = %s AND lease_owner = %s RETURNING status",
        [pk, owner],
    )
