"""Leases handed over in this thread: a transaction that gives an invocation work may take
its lease for the run that executes here right after the commit (`services.runs`); that
run (`worker.execution`) takes it from here instead of leasing again."""

from __future__ import annotations

import threading
from typing import Any

from ..engine.state import Checkpoint

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
