"""An invocation's run, from the side that gives it work: enqueued on commit, its lease
taken at once when the run executes in this thread right after the commit (the worker's
`execute` takes it from `store.leases`)."""

from __future__ import annotations

import os
from typing import Any

from django.db import connection, transaction

from .. import dispatch
from ..store import DjangoStore, leases
from ..transactions import store


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
    transaction.on_commit(lambda: leases.hand_over(key, handed))
    dispatch.enqueue_run(invocation_id)
    transaction.on_commit(lambda: _give_back_unclaimed(key, owner), robust=True)


def _give_back_unclaimed(key: str, owner: str) -> None:
    if leases.take_unclaimed(key, owner):
        store().release_lease_sync(key, owner)
