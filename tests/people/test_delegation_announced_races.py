"""Two announcing sweeps at once, on PostgreSQL (DESIGN 4.3): both see the delegation
that has started unannounced, then both try to mark it (started together at a barrier);
the conditional UPDATE makes the second wait for the first's row lock and match nothing,
so the delegate is told once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.integration.test_concurrency import THREAD_TIMEOUT
from tests.integration.worker import require_postgres
from tests.people.conftest import away
from tests.people.test_delegation_announced import begins
from tests.reliability.test_lock_order import race
from workflows import services, signals
from workflows.models import Delegation
from workflows.services import delegations as out_of_office

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_sweeps_at_once_announce_a_delegation_once(ada, bob, monkeypatch):
    require_postgres("row locks between threads")
    delegation = away(ada, bob, start_hours=2)
    begins(delegation)
    sent: list[Any] = []
    lock = threading.Lock()

    def receiver(sender: Any, delegation_id: Any, action: str, **kwargs: Any) -> None:
        with lock:
            sent.append((delegation_id, action))

    # Each sweep has read its candidates before either marks one.
    both_read = threading.Barrier(2, timeout=THREAD_TIMEOUT)
    mark = out_of_office._announce_started

    def mark_after_both_read(delegation_id: Any, now: Any) -> int:
        both_read.wait()
        return mark(delegation_id, now)

    monkeypatch.setattr(out_of_office, "_announce_started", mark_after_both_read)
    signals.delegation_changed.connect(receiver)
    try:
        outcomes = race([services.announce_delegations] * 2)
    finally:
        signals.delegation_changed.disconnect(receiver)

    assert [o.error for o in outcomes] == [None, None]
    assert sorted(o.value for o in outcomes) == [0, 1]
    assert sent == [(delegation.pk, signals.DELEGATION_STARTED)]
    assert Delegation.objects.get(pk=delegation.pk).announced_at is not None
