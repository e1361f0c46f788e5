"""How the store runs its statements on a database: `Dialect`, the way any Django
database runs them. postgresql.py and sqlite.py subclass it with only what differs."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from ..engine.state import WriteBatch
from ..models import Invocation
from .rows import stored_time
from .statements import Statement, execution_facts, take_over_expired

# A statement with the check of its result (it raises, and so rolls the transaction back).
Checked = tuple[str, list[Any], Callable[[Any], None] | None]


@functools.lru_cache(maxsize=4096)
def _db_pk(using: str, invocation_id: Any) -> Any:
    """An invocation id as the database takes it, cached: every write of a run needs it,
    and preparing it costs about 33,600 instructions, a cache hit 80 (docs/performance.md,
    "The store's choices, measured")."""
    return Invocation._meta.pk.get_db_prep_value(invocation_id, connections[using])


class Dialect:
    """Statements one at a time on Django's cursor; rows locked FOR UPDATE where the
    database has row locks; times passed as parameters, from this machine's clock."""

    # Whether it sends several statements in one round trip (run_checked's in_one_trip).
    pipelines = False

    def __init__(self, using: str) -> None:
        self.using = using

    # -- running statements ------------------------------------------------------------
    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor for the store's own statements (format-style marks)."""
        with connections[self.using].cursor() as cursor:
            yield cursor

    def raw_connection(self) -> Any:
        """The driver's connection under Django's, ready for the store's own cursors."""
        connection = connections[self.using]
        connection.ensure_connection()
        connection.validate_no_broken_transaction()
        return connection.connection

    def select(self, statement: Statement) -> list[tuple]:
        sql, params = statement
        with self.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def select_each(self, statements: list[Statement]) -> list[list[tuple]]:
        """Each statement's rows; run in order, each reading after the one before."""
        return [self.select(statement) for statement in statements]

    def run_checked(self, statements: list[Checked], in_one_trip: bool = False) -> None:
        """Run the statements in order, each result checked; `in_one_trip`: the dialect
        pipelines them (the statements do not depend on each other's success)."""
        with self.cursor() as cursor:
            for sql, params, check in statements:
                cursor.execute(sql, params)
                if check is not None:
                    check(cursor)

    def locking(self, sql: str) -> str:
        """`sql` locking the rows it reads, where the database has row locks."""
        features = connections[self.using].features
        if not features.has_select_for_update:
            return sql
        no_key = features.has_select_for_no_key_update
        return sql + (" FOR NO KEY UPDATE" if no_key else " FOR UPDATE")

    # -- values and times --------------------------------------------------------------
    def pk(self, invocation_id: str) -> Any:
        return _db_pk(self.using, invocation_id)

    def adapt_datetime(self, value: datetime) -> Any:
        return connections[self.using].ops.adapt_datetimefield_value(stored_time(value))

    def clock(self, now: datetime) -> Statement:
        """Leases are judged on the database's clock where it has one that all workers
        share; an embedded database's clock is this machine's."""
        return "%s", [self.adapt_datetime(now)]

    def lease_expiry(self, now: datetime, seconds: float) -> Statement:
        return "%s", [self.adapt_datetime(now + timedelta(seconds=seconds))]

    # -- what a dialect may do in fewer statements ---------------------------------------
    def step(self, batch: WriteBatch, now: datetime, lease_seconds: float) -> Statement | None:
        """One statement that writes the whole batch, conditional on the invocation
        UPDATE, and returns one row: the number of invocations it updated. None: the
        batch is written as separate statements."""
        return None

    def read_checkpoint(self, reads: tuple[Statement, Statement]) -> tuple[list, list]:
        """The node-run and open-interrupt rows of a checkpoint."""
        runs = self.select(reads[0])
        # An interrupt is created with the node run that raised it: none without runs.
        return runs, runs and self.select(reads[1])

    def take_lease(
        self, take: Statement, reads: tuple[Statement, Statement]
    ) -> tuple[tuple, list, list] | None:
        """Run the lease UPDATE (`take`), then, when it took the lease, the checkpoint
        reads; the invocation, node-run and interrupt rows."""
        taken = self.select(take)
        return (taken[0], *self.read_checkpoint(reads)) if taken else None

    def read_for_execution(self, pk: Any, now: datetime) -> tuple | None:
        """Free an expired lease, then read what a delivery needs (see
        DjangoStore.read_for_execution_sync)."""
        sql, params = take_over_expired(pk, self.clock(now))
        with self.cursor() as cursor:
            cursor.execute(sql, params)
        rows = self.select(execution_facts(pk))
        return tuple(rows[0]) if rows else None
