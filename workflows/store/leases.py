"""The execution lease: `Leasing`, DjangoStore's statements that take, renew and give it
back; and the leases handed over in this thread: a transaction that gives an invocation
work may take its lease for the run that executes here right after the commit
(`services.runs`); that run (`worker.execution`) takes it from here instead of leasing
again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from ..engine.errors import InvocationNotFoundError
from ..engine.state import Checkpoint
from ..models import OPEN_STATUSES, Invocation
from . import statements as sql
from .dialect import Checked
from .rows import checkpoint_from

# (owner, workflow version, checkpoint) of a lease taken for a run about to execute.
HandedLease = tuple[str, str, Checkpoint]


class _HandedLeases(threading.local):
    """{invocation id: HandedLease} for the runs this thread executes next."""

    def __init__(self) -> None:
        self.runs: dict[str, HandedLease] = {}


_handed = _HandedLeases()


def hand_over(invocation_id: Any, lease: HandedLease) -> None:
    _handed.runs[str(invocation_id)] = lease


def take_handed(invocation_id: Any) -> HandedLease | None:
    """The lease handed over for this invocation's run in this thread, once."""
    return _handed.runs.pop(str(invocation_id), None)


def take_unclaimed(invocation_id: Any, owner: str) -> bool:
    """Take back the lease `owner` handed over if no run claimed it; whether it did."""
    key = str(invocation_id)
    if _handed.runs.get(key, (None,))[0] != owner:
        return False
    del _handed.runs[key]
    return True


class Leasing:
    """DjangoStore's lease statements (it provides `using`, `dialect` and
    `_checkpoint_reads`)."""

    using: str
    dialect: Any
    _checkpoint_reads: Callable[..., Any]

    # Single statements: each is its own transaction (but free_lease_statements').
    def acquire_lease_sync(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        now, pk = timezone.now(), self.dialect.pk(invocation_id)
        expiry, clock = self.dialect.lease_expiry(now, ttl), self.dialect.clock(now)
        # Take the lease, then read the checkpoint in statements of their own.
        taken = self.dialect.take_lease(
            sql.take_lease(pk, owner, expiry, clock), self._checkpoint_reads(invocation_id, True)
        )
        if taken is not None:
            invocation_row, runs, interrupts = taken
            return checkpoint_from(invocation_row, runs, interrupts, True)
        if not Invocation.objects.using(self.using).filter(pk=invocation_id).exists():
            raise InvocationNotFoundError(invocation_id)
        return None

    def free_lease_statements(
        self, invocation_id: str, owner: str, ttl: float, *, new: bool = False
    ) -> tuple[list[Checked], Callable[[], tuple[Checkpoint, str] | None]]:
        """The statements that, in the caller's transaction, take the lease of an open
        invocation no run holds (statements.take_free_lease) and read the checkpoint a run
        needs, to run with others (`commit_with_sync`); and what they found once
        run: the checkpoint and the invocation's workflow version, or None (not taken).
        `new`: created in this transaction, so it has no node runs and no interrupts."""
        pk = self.dialect.pk(invocation_id)
        take = sql.take_free_lease(pk, owner, self.dialect.lease_expiry(timezone.now(), ttl))
        statements = [take] if new else [take, *self._checkpoint_reads(invocation_id, True)]
        found: list[list[tuple]] = []
        checked: list[Checked] = [
            (query, params, lambda cursor: found.append(cursor.fetchall()))
            for query, params in statements
        ]

        def taken() -> tuple[Checkpoint, str] | None:
            if not found[0]:
                return None
            row = found[0][0]
            runs, interrupts = (found[1], found[2]) if len(found) == 3 else ([], [])
            return checkpoint_from(row[:-1], runs, interrupts, True), row[-1]

        return checked, taken

    def renew_lease_sync(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """Extend `owner`'s lease by `ttl` from now. False: another run holds the lease, or
        the invocation is finished; None: the row is not visible here (not committed yet)."""
        expiry = self.dialect.lease_expiry(timezone.now(), ttl)
        query, params = sql.renew_lease(self.dialect.pk(invocation_id), owner, expiry)
        with self.dialect.cursor() as cursor:
            cursor.execute(query, params)
            if cursor.rowcount:
                return True
        visible = Invocation.objects.using(self.using).filter(pk=invocation_id).exists()
        return False if visible else None

    def release_lease_sync(self, invocation_id: str, owner: str) -> bool:
        rows = self.dialect.select(sql.release_lease(self.dialect.pk(invocation_id), owner))
        return bool(rows) and rows[0][0] in OPEN_STATUSES and self._answers_waiting(invocation_id)

    def _answers_waiting(self, invocation_id: str) -> bool:
        """Whether answers wait that no pass has seen."""
        return bool(self.dialect.select(sql.answers_waiting(self.dialect.pk(invocation_id))))
