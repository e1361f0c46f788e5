"""Two overlapping delegations between the same people made at once (PostgreSQL): the
delegator's row is locked while the overlap is checked, so the second waits for the first
and is refused; they never both pass."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from tests.integration.test_concurrency import THREAD_TIMEOUT
from tests.integration.worker import require_postgres
from tests.locking import waits_on_a_lock
from tests.people.conftest import window
from workflows import services
from workflows.audit import trail
from workflows.models import Delegation

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_overlapping_delegations_at_once_are_checked_in_turn(ada, bob, monkeypatch):
    require_postgres("row locks and concurrent connections")
    starts_at, ends_at = window()
    recording, release = threading.Event(), threading.Event()
    record = trail.record

    def first_pauses(*args, **kwargs):
        if threading.current_thread().name == "first":
            recording.set()  # its delegation is inserted, the delegator's row locked
            assert release.wait(THREAD_TIMEOUT)
        return record(*args, **kwargs)

    monkeypatch.setattr(trail, "record", first_pauses)
    outcomes: dict[str, str] = {}

    def delegate() -> None:
        try:
            services.delegate(ada, bob, starts_at, ends_at, actor=ada)
            outcomes[threading.current_thread().name] = "made"
        except ValidationError as exc:
            outcomes[threading.current_thread().name] = " ".join(exc.messages)
        finally:
            connection.close()

    one = threading.Thread(target=delegate, name="first")
    two = threading.Thread(target=delegate, name="second")
    one.start()
    assert recording.wait(THREAD_TIMEOUT)
    two.start()
    # Without the lock the second would not wait: it would miss the first's uncommitted
    # row, and both would be made.
    waited = waits_on_a_lock(two, THREAD_TIMEOUT)
    release.set()
    one.join(THREAD_TIMEOUT)
    two.join(THREAD_TIMEOUT)

    assert waited, "the second delegation did not wait for the first"
    assert outcomes["first"] == "made"
    assert "already stands in for ada" in outcomes["second"]
    assert Delegation.objects.count() == 1
