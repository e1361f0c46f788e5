"""The audit trail adds no shared lock to the answer path (PostgreSQL): 20 approvers
deciding on 20 invocations at once never wait on one another, even while one of them
holds its transaction open after writing its entries; every chain verifies after."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections

from tests.asking import ask
from tests.audit.written import after_each_entry
from tests.factories import ApproverFactory
from workflows import services
from workflows.audit import trail
from workflows.audit.verify import verify
from workflows.models import AuditEntry

from .test_concurrency import THREAD_TIMEOUT, describe, run_at_once
from .worker import require_postgres

pytestmark = pytest.mark.postgres

# Lock requests waiting, of the sessions on this test's database (the server is shared).
# Relation extension locks ("extend": inserts at once growing the table's file by a page)
# are the storage's, not a row two answers share, and come and go with the table's size.
# The notification queue's lock (an "object" lock on pg_database, oid 1262, object 0) is
# taken by every committing transaction that sent a NOTIFY (the live stream's wake-up,
# migration 0017) for the moment its notifications are queued: the commit's, not the
# audit trail's, and held for no row (docs/deployment.md, "ASGI and live streams").
WAITING_ON_LOCKS = (
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE NOT l.granted AND l.locktype <> 'extend' AND a.datname = current_database() "
    "AND NOT (l.locktype = 'object' AND l.classid = 'pg_database'::regclass AND l.objid = 0)"
)


class LockSampler(threading.Thread):
    """Counts, on a connection of its own, the lock requests some backend waits on."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop, self.samples, self.waits = threading.Event(), 0, 0

    def run(self) -> None:
        try:
            with connections["default"].cursor() as cursor:
                while not self.stop.is_set():
                    cursor.execute(WAITING_ON_LOCKS)
                    self.waits += cursor.fetchone()[0]
                    self.samples += 1
                    time.sleep(0.001)
        finally:
            connection.close()


@pytest.fixture
def twenty(transactional_db):
    require_postgres("row locks and concurrent connections")
    approvers = [ApproverFactory(username=f"approver{n:02d}") for n in range(20)]
    questions = [ask(assignees=[f"user:{a.username}"]) for a in approvers]
    return list(zip(approvers, questions, strict=True))


def decide(approver: Any, question: Any) -> Any:
    return services.decide(question.pk, {"approved": True}, actor=approver)


def test_twenty_decisions_at_once_wait_on_no_shared_row(twenty):
    sampler = LockSampler()
    sampler.start()
    started = time.perf_counter()
    results, errors = run_at_once([lambda a=a, q=q: decide(a, q) for a, q in twenty])
    elapsed = time.perf_counter() - started
    sampler.stop.set()
    sampler.join(THREAD_TIMEOUT)
    assert not errors, describe(errors)
    assert len(results) == 20
    assert sampler.samples > 0 and sampler.waits == 0, (
        f"{sampler.waits} lock waits in {sampler.samples} samples over {elapsed:.2f} s"
    )
    report = verify()
    assert report.ok, report.problems
    assert report.chains == 20
    assert AuditEntry.objects.filter(action="answer.accepted").count() == 20


def test_a_decision_holding_its_transaction_open_delays_none_of_the_others(twenty, monkeypatch):
    (held_approver, held), others = twenty[0], twenty[1:]
    holding, release = threading.Event(), threading.Event()

    def hold_there(action: str, kwargs: dict[str, Any]) -> None:
        if action == "answer.accepted" and kwargs["interrupt"].id == held.pk:
            holding.set()  # its entries written, its chain head locked: now wait
            release.wait(THREAD_TIMEOUT)

    after_each_entry(monkeypatch, hold_there)
    holder_errors: list[BaseException] = []

    def hold() -> None:
        try:
            decide(held_approver, held)
        except BaseException as exc:  # reported below
            holder_errors.append(exc)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(THREAD_TIMEOUT), "the holding decision never got there"
        results, errors = run_at_once([lambda a=a, q=q: decide(a, q) for a, q in others])
        assert not errors, describe(errors)
        assert len(results) == 19
        assert holder.is_alive()  # still inside its transaction
        assert AuditEntry.objects.filter(action="answer.accepted").count() == 19
    finally:
        release.set()
        holder.join(THREAD_TIMEOUT)
    assert not holder_errors, describe(holder_errors)
    report = verify()
    assert report.ok, report.problems
    assert AuditEntry.objects.filter(action="answer.accepted").count() == 20


@pytest.mark.parametrize("chain", ["invocation", "outside invocations"])
def test_entries_appended_at_once_to_one_chain_queue_and_keep_it_whole(transactional_db, chain):
    require_postgres("row locks and concurrent connections")
    invocation_id = ask().invocation_id if chain == "invocation" else None

    def append(n: int) -> Any:
        from django.db import transaction

        with transaction.atomic():
            entry = trail.record("grant.used", invocation_id=invocation_id, data={"n": n})
            time.sleep(0.01)  # hold the head a moment: the others must wait for it
            return entry

    results, errors = run_at_once([lambda n=n: append(n) for n in range(12)])
    assert not errors, describe(errors)
    assert len(results) == 12
    report = verify()
    assert report.ok, report.problems
    assert AuditEntry.objects.filter(action="grant.used").count() == 12
