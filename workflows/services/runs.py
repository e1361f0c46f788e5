"""An invocation's run, from the side that gives it work: enqueued on commit, its lease
taken at once when the run executes in this thread right after the commit (the worker's
`execute` takes it from `store.leases`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from .. import dispatch
from ..engine.state import Checkpoint
from ..store import DjangoStore, leases
from ..store.dialect import Checked
from ..transactions import store


class RunHere:
    """`dispatch.enqueue_run`, taking the invocation's lease in the current transaction
    when that run executes in this thread right after the commit (Celery eager, the
    outermost transaction): the run then starts at once, without a lease transaction of
    its own (on PostgreSQL a commit and two round trips: docs/performance.md). Not taken
    (another run holds the lease, or one left it unfinished): the run takes it itself,
    as in a worker. `new`: the invocation was created in this transaction.

    `lease_statements()` go with the transaction's other writes (`commit_with_sync`),
    then `enqueue()`; `enqueue_run_here` does both."""

    def __init__(self, db: DjangoStore, invocation_id: Any, *, new: bool = False) -> None:
        self.db, self.key, self.new = db, str(invocation_id), new
        self.owner: str | None = None
        # (Not in a caller's transaction: it may outlast the lease.)
        if dispatch.runs_in_process() and not connection.savepoint_ids:
            self.owner = os.urandom(16).hex()
        self._taken: Callable[[], tuple[Checkpoint, str] | None] | None = None

    def lease_statements(self) -> list[Checked]:
        """The statements that take the lease and read the run's checkpoint; none when
        the run takes its lease itself."""
        if self.owner is None:
            return []
        ttl = self.db.lease_seconds
        statements, self._taken = self.db.free_lease_statements(
            self.key, self.owner, ttl, new=self.new
        )
        return statements

    def enqueue(self) -> None:
        """Enqueue the run on commit; a lease the statements took is handed to it."""
        taken = None if self._taken is None else self._taken()
        if taken is None or self.owner is None:
            dispatch.enqueue_run(self.key)
            return
        key, owner = self.key, self.owner
        checkpoint, version = taken
        # Handed over once committed (a rolled-back transaction leaves nothing behind), to
        # the run enqueued next; a lease that run did not claim (it never executed) is
        # given back, so the work waits for no lease to expire.
        handed = (owner, version, checkpoint)
        transaction.on_commit(lambda: leases.hand_over(key, handed))
        dispatch.enqueue_run(key)
        transaction.on_commit(lambda: _give_back_unclaimed(key, owner), robust=True)


def enqueue_run_here(db: DjangoStore, invocation_id: Any, *, new: bool = False) -> None:
    """Take the lease for a run in this thread where RunHere does, and enqueue the run."""
    run = RunHere(db, invocation_id, new=new)
    db.dialect.run_checked(run.lease_statements(), in_one_trip=db.dialect.pipelines)
    run.enqueue()


def _give_back_unclaimed(key: str, owner: str) -> None:
    if leases.take_unclaimed(key, owner):
        store().release_lease_sync(key, owner)
