"""Every change the services and the deadline sweep make appends its entry in the same
transaction: the entry names who, what and what was asked; when the entry cannot be
written the change is not kept either; a refused change writes none."""

from datetime import timedelta
from typing import Any

import pytest
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from tests.asking import ask
from tests.audit.conftest import actions, entries
from tests.audit.written import after_each_entry
from tests.factories import ApproverFactory, StaffFactory, UserFactory
from workflows import services
from workflows.audit import subject_hash
from workflows.audit.verify import verify
from workflows.engine.errors import (
    AlreadyDecidedError,
    InterruptNotPendingError,
    InvocationStateError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import (
    AuditEntry,
    Decision,
    Interrupt,
    Invocation,
    NodeRun,
    SessionEvent,
)

pytestmark = pytest.mark.django_db(transaction=True)


class AuditWriteFailed(RuntimeError):
    pass


@pytest.fixture
def failing_audit(monkeypatch):
    """trail.record (or the statement of trail.appending, sent with other writes) writes
    its entry, then fails: the whole change must be undone."""
    return lambda: fail_entry(monkeypatch, 1)


def fail_entry(monkeypatch: Any, failing: int) -> None:
    """The `failing`-th audit entry written from now on is written, then its write fails,
    through trail.record or through the statement of trail.appending."""
    written: list[str] = []

    def counted(action: str, kwargs: dict[str, Any]) -> None:
        written.append(action)
        if len(written) == failing:
            raise AuditWriteFailed(action)

    after_each_entry(monkeypatch, counted)


def state() -> str:
    models = (Invocation, Interrupt, Decision, NodeRun, SessionEvent, AuditEntry)
    return serializers.serialize("json", [row for model in models for row in model.objects.all()])


def asked(interrupt: Interrupt) -> str:
    return subject_hash(interrupt.message, interrupt.payload, interrupt.response_schema)


def newest() -> AuditEntry:
    return AuditEntry.objects.order_by("-id").first()


def fresh(interrupt: Interrupt) -> Interrupt:
    return Interrupt.objects.select_related("invocation").get(pk=interrupt.pk)


# --- each action: its entry, and all or nothing ----------------------------------------------


def test_start_writes_invocation_started():
    ada = UserFactory(username="ada")
    invocation = ask(ada).invocation
    (entry,) = entries(action="invocation.started")
    assert (entry.invocation_id, entry.interrupt_id, entry.actor, entry.actor_name) == (
        invocation.pk,
        None,
        ada,
        "ada",
    )
    assert entry.data["workflow"] == invocation.workflow_name
    assert set(entry.data) == {"workflow", "version", "input_hash"}


def test_start_is_undone_with_its_entry(failing_audit):
    failing_audit()
    with pytest.raises(AuditWriteFailed):
        ask()
    assert state() == "[]"


def test_a_machine_answer_writes_answer_accepted():
    interrupt = ask()
    services.submit_function_responses(
        [{"id": interrupt.pk, "name": "question", "response": {"approved": True}}]
    )
    entry = newest()
    assert (entry.action, entry.interrupt_id, entry.actor_id) == (
        "answer.accepted",
        interrupt.pk,
        None,
    )
    assert entry.data == {"response": {"approved": True}}
    assert entry.subject_hash == asked(interrupt)


def test_an_answer_is_undone_with_its_entry(failing_audit):
    interrupt = ask()
    before = state()
    failing_audit()
    with pytest.raises(AuditWriteFailed):
        services.submit_function_responses(
            [{"id": interrupt.pk, "name": "question", "response": {"approved": True}}]
        )
    assert state() == before


def test_a_decision_that_answers_writes_decision_recorded_then_answer_accepted():
    ada = ApproverFactory(username="ada")
    interrupt = ask()
    decision = services.decide(interrupt.pk, {"approved": True}, actor=ada, comment="fine")
    recorded, accepted = entries(interrupt_id=interrupt.pk)
    assert (recorded.action, accepted.action) == ("decision.recorded", "answer.accepted")
    assert recorded.data == {
        "decision": decision.pk,
        "response": {"approved": True},
        "comment": "fine",
    }
    assert (recorded.actor, accepted.actor, recorded.on_behalf_of) == (ada, ada, None)
    assert recorded.subject_hash == accepted.subject_hash == asked(interrupt)
    assert accepted.prev_hash == recorded.entry_hash


def test_a_decision_short_of_the_quorum_writes_only_decision_recorded():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    interrupt = ask(quorum=2)
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    assert actions(interrupt_id=interrupt.pk) == ["decision.recorded"]
    services.decide(interrupt.pk, {"approved": True}, actor=ben)
    assert actions(interrupt_id=interrupt.pk) == [
        "decision.recorded",
        "decision.recorded",
        "answer.accepted",
    ]
    assert [e.actor_name for e in entries(interrupt_id=interrupt.pk)] == ["ann", "ben", "ben"]


@pytest.mark.parametrize("failing", [1, 2])
def test_a_decision_is_undone_when_either_of_its_entries_fails(monkeypatch, failing):
    ada = ApproverFactory(username="ada")
    interrupt = ask()
    before = state()
    fail_entry(monkeypatch, failing)
    with pytest.raises(AuditWriteFailed):
        services.decide(interrupt.pk, {"approved": True}, actor=ada)
    assert state() == before


def test_claim_release_and_reassign_write_their_entries():
    ada, boss = ApproverFactory(username="ada"), StaffFactory(username="boss")
    interrupt = ask(assignees=["user:ada", "user:boss"])
    services.claim(interrupt.pk, actor=ada)
    services.release(interrupt.pk, actor=ada)
    services.claim(interrupt.pk, actor=ada)
    services.reassign(interrupt.pk, ["user:boss"], actor=boss)
    claimed, released, _, reassigned = entries(interrupt_id=interrupt.pk)
    assert (claimed.action, claimed.actor, claimed.data) == ("interrupt.claimed", ada, {})
    assert (released.action, released.data) == ("interrupt.released", {"claimed_by": "ada"})
    assert (reassigned.action, reassigned.actor) == ("interrupt.reassigned", boss)
    assert reassigned.data == {
        "assignees": ["user:boss"],
        "previous": ["user:ada", "user:boss"],
        "claimed_by": "ada",
    }
    assert {e.subject_hash for e in (claimed, released, reassigned)} == {asked(interrupt)}


@pytest.mark.parametrize("action", ["claim", "release", "reassign"])
def test_claim_release_and_reassign_are_undone_with_their_entry(failing_audit, action):
    boss = StaffFactory(username="boss")
    interrupt = ask()
    if action == "release":
        services.claim(interrupt.pk, actor=boss)
    before = state()
    failing_audit()
    with pytest.raises(AuditWriteFailed):
        if action == "reassign":
            services.reassign(interrupt.pk, ["user:boss"], actor=boss)
        else:
            getattr(services, action)(interrupt.pk, actor=boss)
    assert state() == before


def test_expiry_writes_interrupt_expired_with_the_policy_it_applied():
    answered_by_default = ask(timeout=60, on_timeout={"approved": False})
    failed_on_timeout = ask(timeout=60)
    assert services.expire_overdue_interrupts(now=timezone.now() + timedelta(minutes=2)) == 2
    by_default, failing = (newest_of(answered_by_default), newest_of(failed_on_timeout))
    assert (by_default.action, by_default.actor_id) == ("interrupt.expired", None)
    assert by_default.data["policy"] == "default_response"
    assert by_default.data["response"] == {"approved": False}
    assert failing.data["policy"] == "fail" and "response" not in failing.data
    assert by_default.data["deadline"] and by_default.subject_hash == asked(answered_by_default)


def newest_of(interrupt: Interrupt) -> AuditEntry:
    return entries(interrupt_id=interrupt.pk)[-1]


def test_expiry_is_undone_with_its_entry(failing_audit):
    interrupt = ask(timeout=60)
    before = state()
    failing_audit()
    assert services.expire_overdue_interrupts(now=timezone.now() + timedelta(minutes=2)) == 0
    assert state() == before
    assert fresh(interrupt).status == InterruptStatus.PENDING


def test_cancel_and_retry_write_their_entries():
    boss = StaffFactory(username="boss")
    interrupt = ask()
    invocation = interrupt.invocation
    services.cancel(invocation, actor=boss)
    entry = newest()
    assert (entry.action, entry.invocation_id, entry.interrupt_id, entry.actor) == (
        "invocation.cancelled",
        invocation.pk,
        None,
        boss,
    )
    assert entry.data == {"status": "WAITING", "cancelled_interrupts": [interrupt.pk]}
    failing = ask().invocation
    services.fail(failing.pk, "the ledger was down")
    services.retry(failing, actor=boss)
    entry = newest()
    assert (entry.action, entry.invocation_id, entry.actor) == (
        "invocation.retried",
        failing.pk,
        boss,
    )
    assert entry.data == {"error": "the ledger was down"}


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_cancel_and_retry_are_undone_with_their_entry(failing_audit, action):
    invocation = ask().invocation
    if action == "retry":
        services.fail(invocation.pk, "boom")
    before = state()
    failing_audit()
    with pytest.raises(AuditWriteFailed):
        getattr(services, action)(invocation)
    assert state() == before


def test_a_whole_approval_leaves_a_chain_that_verifies():
    ada = ApproverFactory(username="ada")
    interrupt = ask(ada)
    services.claim(interrupt.pk, actor=ada)
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    assert fresh(interrupt).invocation.status == NodeStatus.COMPLETED
    assert actions(invocation_id=interrupt.invocation_id) == [
        "invocation.started",
        "interrupt.claimed",
        "decision.recorded",
        "answer.accepted",
    ]
    assert Invocation.objects.get(pk=interrupt.invocation_id).audit_head == newest().entry_hash
    assert verify().ok


# --- refused changes write nothing ------------------------------------------------------------


@pytest.fixture
def pending():
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada"])
    return interrupt, ada


def refused(error: type[BaseException], call, *args: Any, **kwargs: Any) -> None:
    before = state()
    with pytest.raises(error):
        call(*args, **kwargs)
    assert state() == before


def test_refused_decisions_write_nothing(pending):
    interrupt, ada = pending
    outsider = ApproverFactory(username="eve")
    refused(PermissionDenied, services.decide, interrupt.pk, {"approved": True}, actor=outsider)
    refused(ResponseValidationError, services.decide, interrupt.pk, {"approved": "yes"}, actor=ada)
    refused(UnknownInterruptError, services.decide, "nope", {"approved": True}, actor=ada)
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    refused(AlreadyDecidedError, services.decide, interrupt.pk, {"approved": True}, actor=ada)
    other = ApproverFactory(username="bob")
    Interrupt.objects.filter(pk=interrupt.pk).update(assignees=[])
    refused(
        InterruptNotPendingError, services.decide, interrupt.pk, {"approved": True}, actor=other
    )


def test_refused_answers_write_nothing(pending):
    interrupt, _ = pending
    outsider = ApproverFactory(username="eve")
    answer = [{"id": interrupt.pk, "name": "question", "response": {"approved": True}}]
    refused(PermissionDenied, services.submit_function_responses, answer, actor=outsider)
    wrong = [{"id": interrupt.pk, "name": "question", "response": {"approved": 1}}]
    refused(ResponseValidationError, services.submit_function_responses, wrong)
    services.submit_function_responses(answer)
    count = AuditEntry.objects.count()
    services.submit_function_responses(answer)  # the same answer again changes nothing
    assert AuditEntry.objects.count() == count
    different = [{"id": interrupt.pk, "name": "question", "response": {"approved": False}}]
    refused(InterruptNotPendingError, services.submit_function_responses, different)


def test_refused_claims_releases_and_reassignments_write_nothing(pending):
    interrupt, ada = pending
    outsider = ApproverFactory(username="eve")
    refused(PermissionDenied, services.claim, interrupt.pk, actor=outsider)
    refused(PermissionDenied, services.reassign, interrupt.pk, ["user:eve"], actor=outsider)
    refused(ResponseValidationError, services.reassign, interrupt.pk, ["user:nobody"], actor=ada)
    count = AuditEntry.objects.count()
    services.release(interrupt.pk, actor=ada)  # not claimed: nothing to release
    services.claim(interrupt.pk, actor=ada)
    services.claim(interrupt.pk, actor=ada)  # one's own claim again: nothing new
    assert AuditEntry.objects.count() == count + 1
    boss_free = ApproverFactory(username="bob")
    refused(PermissionDenied, services.release, interrupt.pk, actor=boss_free)
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    refused(InterruptNotPendingError, services.claim, interrupt.pk, actor=ada)


def test_refused_cancel_and_retry_write_nothing(pending):
    interrupt, ada = pending
    refused(InvocationStateError, services.retry, interrupt.invocation)
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    refused(InvocationStateError, services.cancel, interrupt.invocation)


def test_an_expiry_put_off_by_a_live_run_writes_nothing():
    interrupt = ask(timeout=60)
    Invocation.objects.filter(pk=interrupt.invocation_id).update(
        lease_owner="another run", lease_expires_at=timezone.now() + timedelta(hours=1)
    )
    before = state()
    assert services.expire_overdue_interrupts(now=timezone.now() + timedelta(minutes=2)) == 0
    assert state() == before
