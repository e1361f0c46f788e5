"""services.decide, claim, release, reassign (DESIGN 4.1): quorum, one decision per
person, named errors that change nothing, and 20 approvers at once on PostgreSQL."""

import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core import serializers
from django.core.exceptions import PermissionDenied

from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory, StaffFactory, UserFactory, grant_answer
from tests.integration.test_concurrency import describe, run_at_once
from tests.integration.worker import require_postgres
from workflows import services, signals
from workflows.engine.errors import (
    AlreadyClaimedError,
    AlreadyDecidedError,
    InterruptNotPendingError,
    InvocationStateError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Interrupt, Invocation, SessionEvent

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *Interrupt.objects.all(), *Decision.objects.all()]
    rows += SessionEvent.objects.all()
    return serializers.serialize("json", rows)


def finished(interrupt: Interrupt) -> Invocation:
    return Invocation.objects.get(pk=interrupt.invocation_id)


@pytest.fixture
def recorded():
    receipts = []

    def receiver(sender, **kwargs):
        receipts.append(kwargs)

    signals.decision_recorded.connect(receiver, weak=False, dispatch_uid="test-decisions")
    yield receipts
    signals.decision_recorded.disconnect(dispatch_uid="test-decisions")


def test_quorum_one_the_first_decision_answers_with_its_response(recorded):
    ada = ApproverFactory(username="ada")
    interrupt = ask(response_schema={"type": "object", "properties": {"size": {"type": "integer"}}})
    decision = services.decide(interrupt.pk, {"size": 3}, actor=ada, comment="fits")
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert (decision.response, decision.comment, decision.actor) == ({"size": 3}, "fits", ada)
    invocation = finished(interrupt)
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"size": 3}
    assert Interrupt.objects.get(pk=interrupt.pk).resolved_by == ada
    assert recorded == [
        {
            "signal": signals.decision_recorded,
            "decision_id": decision.pk,
            "interrupt_id": interrupt.pk,
        }
    ]


def test_quorum_of_three_needs_three_approvals_and_lists_them():
    approvers = [ApproverFactory(username=n) for n in ("ann", "ben", "cat")]
    interrupt = ask(quorum=3)
    first = services.decide(interrupt.pk, {"approved": True, "comment": "ok"}, actor=approvers[0])
    services.decide(interrupt.pk, {"approved": True}, actor=approvers[1], comment="fine")
    assert first.interrupt.status == InterruptStatus.PENDING
    assert finished(interrupt).status == NodeStatus.WAITING
    last = services.decide(interrupt.pk, {"approved": True}, actor=approvers[2])
    assert last.interrupt.status == InterruptStatus.RESOLVED
    output = finished(interrupt).output
    assert output["approved"] is True
    assert [(d["actor"], d["approved"], d["comment"]) for d in output["decisions"]] == [
        ("ann", True, "ok"),
        ("ben", True, "fine"),
        ("cat", True, ""),
    ]


def test_the_first_rejection_answers_a_quorum_vote_at_once():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    interrupt = ask(quorum=3)
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    services.decide(interrupt.pk, {"approved": False, "comment": "too much"}, actor=ben)
    output = finished(interrupt).output
    assert output["approved"] is False and output["comment"] == "too much"
    assert [d["actor"] for d in output["decisions"]] == ["ann", "ben"]


def refused(call, error, match: str):
    before = snapshot()
    with pytest.raises(error, match=match) as raised:
        call()
    assert snapshot() == before, "a refused decision changes nothing"
    return raised.value


def test_one_decision_per_person():
    ann = ApproverFactory(username="ann")
    interrupt = ask(quorum=2)
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    error = refused(
        lambda: services.decide(interrupt.pk, {"approved": True}, actor=ann),
        AlreadyDecidedError,
        "ann already decided",
    )
    assert error.code == "already_decided"


def test_the_rule_refuses_with_permission_denied():
    starter = ApproverFactory(username="starter")
    plain_staff = UserFactory(username="staff", is_staff=True)
    outsider = ApproverFactory(username="outsider")
    assigned = ask(assignees=["group:finance"])
    four_eyes = ask(user=starter, four_eyes=True)
    refused(
        lambda: services.decide(assigned.pk, {"approved": True}, actor=outsider),
        PermissionDenied,
        "not among the assignees",
    )
    refused(
        lambda: services.decide(four_eyes.pk, {"approved": True}, actor=starter),
        PermissionDenied,
        "four eyes",
    )
    refused(
        lambda: services.decide(assigned.pk, {"approved": True}, actor=plain_staff),
        PermissionDenied,
        "lacks the permission",
    )
    root = StaffFactory(username="root")
    refused(
        lambda: services.decide(assigned.pk, {"approved": True}, actor=root),
        PermissionDenied,
        "root is not among the assignees",
    )
    Group.objects.create(name="finance").user_set.add(outsider)
    outsider = type(outsider).objects.get(pk=outsider.pk)  # groups are cached per object
    services.decide(assigned.pk, {"approved": True}, actor=outsider)
    assert finished(assigned).status == NodeStatus.COMPLETED


def test_late_unknown_and_invalid_decisions_are_named_errors():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    interrupt = ask()
    refused(
        lambda: services.decide("nope", {"approved": True}, actor=ann),
        UnknownInterruptError,
        "nope",
    )
    error = refused(
        lambda: services.decide(interrupt.pk, {"approved": "yes"}, actor=ann),
        ResponseValidationError,
        "not of type 'boolean'",
    )
    assert error.field == "approved"
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    refused(
        lambda: services.decide(interrupt.pk, {"approved": True}, actor=ben),
        InterruptNotPendingError,
        "resolved, not pending",
    )


def test_a_quorum_decision_must_vote_and_must_not_bring_its_own_decisions():
    ann = ApproverFactory()
    schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
    interrupt = ask(quorum=2, response_schema=schema)
    error = refused(
        lambda: services.decide(interrupt.pk, {}, actor=ann),
        ResponseValidationError,
        "must approve or reject",
    )
    assert error.field == "approved"
    error = refused(
        lambda: services.decide(interrupt.pk, {"approved": True, "decisions": []}, actor=ann),
        ResponseValidationError,
        "added by the approval service",
    )
    assert error.field == "decisions"


def test_a_failing_receiver_does_not_undo_the_decision():
    def broken(sender, **kwargs):
        raise RuntimeError("receiver down")

    signals.decision_recorded.connect(broken, weak=False, dispatch_uid="test-broken")
    try:
        interrupt = ask()
        services.decide(interrupt.pk, {"approved": True}, actor=ApproverFactory())
    finally:
        signals.decision_recorded.disconnect(dispatch_uid="test-broken")
    assert Decision.objects.filter(interrupt=interrupt).count() == 1
    assert finished(interrupt).status == NodeStatus.COMPLETED


def test_claim_warns_colleagues_but_never_blocks_a_decision():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    interrupt = ask()
    claimed = services.claim(interrupt.pk, actor=ann)
    assert claimed.claimed_by == ann and claimed.claimed_at is not None
    assert services.claim(interrupt.pk, actor=ann).claimed_at == claimed.claimed_at
    refused(lambda: services.claim(interrupt.pk, actor=ben), AlreadyClaimedError, "claimed by ann")
    refused(lambda: services.release(interrupt.pk, actor=ben), PermissionDenied, "claimed by ann")
    services.decide(interrupt.pk, {"approved": False}, actor=ben)
    assert finished(interrupt).status == NodeStatus.COMPLETED


def test_release_by_the_claimer_or_a_supervisor():
    ann = ApproverFactory(username="ann")
    supervisor = grant_answer(UserFactory(is_staff=True), "reassign_interrupt")
    interrupt = ask()
    services.claim(interrupt.pk, actor=ann)
    assert services.release(interrupt.pk, actor=ann).claimed_by is None
    services.claim(interrupt.pk, actor=ann)
    assert services.release(interrupt.pk, actor=supervisor).claimed_by is None
    stranger = UserFactory()
    refused(lambda: services.claim(interrupt.pk, actor=stranger), PermissionDenied, "lacks")


def test_reassign_checks_names_and_who_asks():
    ann = ApproverFactory(username="ann")
    ben = ApproverFactory(username="ben")
    Group.objects.create(name="ops").user_set.add(UserFactory())
    interrupt = ask(assignees=["user:ann", "group:ops"], quorum=2, response_schema=APPROVAL)
    services.claim(interrupt.pk, actor=ann)
    for assignees, match in [
        (["ops"], 'is not "user:<username>"'),
        (["user:ghost", "group:ops", "group:nobody"], "no such user:ghost, group:nobody"),
        (["user:ben"], "quorum 2 cannot be met"),
        ("user:ben", "must be a list"),
    ]:
        error = refused(
            lambda a=assignees: services.reassign(interrupt.pk, a, actor=ann),
            ResponseValidationError,
            match,
        )
        assert error.field == "assignees"
    refused(
        lambda: services.reassign(interrupt.pk, ["user:ben"], actor=ben),
        PermissionDenied,
        "ben may not reassign",
    )
    moved = services.reassign(interrupt.pk, ["user:ben", "group:ops"], actor=ann)
    assert (moved.assignees, moved.claimed_by) == (["user:ben", "group:ops"], None)
    refused(
        lambda: services.decide(interrupt.pk, {"approved": True}, actor=ann),
        PermissionDenied,
        "not among the assignees",
    )
    services.decide(interrupt.pk, {"approved": True}, actor=ben)


def race(calls: dict[str, Callable[[], Any]], expected: dict[type, str]) -> dict[str, str]:
    """Run the calls at once (PostgreSQL); return each one's outcome: "done", or the name
    given in `expected` for the named error it raised. Any other error fails the test."""
    require_postgres("row locks and concurrent connections")
    outcomes: dict[str, str] = {}
    lock = threading.Lock()

    def outcome_of(key: str, call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                call()
                outcome = "done"
            except tuple(expected) as exc:
                outcome = expected[type(exc)]
            with lock:
                outcomes[key] = outcome

        return run

    _, errors = run_at_once([outcome_of(key, call) for key, call in calls.items()])
    assert errors == [], describe(errors)
    return outcomes


def approving(interrupt: Interrupt, user) -> Callable[[], Any]:
    return lambda: services.decide(interrupt.pk, {"approved": True}, actor=user)


@pytest.mark.postgres
def test_twenty_approvers_at_once_on_a_quorum_of_three(transactional_db):
    approvers = [ApproverFactory(username=f"approver{n:02d}") for n in range(20)]
    interrupt = ask(quorum=3)
    outcomes = race(
        {user.username: approving(interrupt, user) for user in approvers},
        {InterruptNotPendingError: "not pending"},
    )
    assert sorted(outcomes.values()).count("done") == 3
    assert sorted(outcomes.values()).count("not pending") == 17
    counted = {u for u, o in outcomes.items() if o == "done"}
    assert set(Decision.objects.values_list("actor__username", flat=True)) == counted
    user_events = SessionEvent.objects.filter(invocation_id=interrupt.invocation_id, author="user")
    assert user_events.count() == 1, "exactly one FunctionResponse"
    (response,) = user_events.get().function_responses
    assert {d["actor"] for d in response["response"]["decisions"]} == counted
    invocation = finished(interrupt)
    assert invocation.status == NodeStatus.COMPLETED, invocation.error


@pytest.mark.postgres
def test_one_person_deciding_twice_at_once_counts_once(transactional_db):
    ann = ApproverFactory(username="ann")
    interrupt = ask(quorum=2)
    outcomes = race(
        {f"click {n}": approving(interrupt, ann) for n in range(10)},
        {AlreadyDecidedError: "already decided"},
    )
    assert sorted(outcomes.values()) == ["already decided"] * 9 + ["done"]
    assert Decision.objects.filter(interrupt=interrupt).count() == 1
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.PENDING


@pytest.mark.postgres
@pytest.mark.parametrize("round_", range(3))
def test_decisions_racing_cancel_reach_nobody_as_a_database_error(transactional_db, round_):
    approvers = [ApproverFactory(username=f"racer{n}") for n in range(8)]
    interrupt = ask(quorum=3)
    calls = {user.username: approving(interrupt, user) for user in approvers}
    calls["cancel"] = lambda: services.cancel(interrupt.invocation_id)
    outcomes = race(
        calls,
        {InterruptNotPendingError: "not pending", InvocationStateError: "too late to cancel"},
    )
    stored = Interrupt.objects.get(pk=interrupt.pk)
    counted = [u for u, o in outcomes.items() if o == "done" and u != "cancel"]
    assert Decision.objects.filter(interrupt=interrupt).count() == len(counted) <= 3
    user_events = SessionEvent.objects.filter(invocation_id=interrupt.invocation_id, author="user")
    if stored.status == InterruptStatus.RESOLVED:
        assert len(counted) == 3 and user_events.count() == 1
    else:
        assert stored.status == InterruptStatus.CANCELLED and outcomes["cancel"] == "done"
        assert len(counted) < 3 and not user_events.exists()


def test_a_decimal_answer_is_taken_as_the_number_it_is():
    ada = ApproverFactory(username="ada")
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}}
    decided = ask(response_schema=schema)
    decision = services.decide(decided.pk, {"amount": Decimal("3.5")}, actor=ada)
    assert Decision.objects.get(pk=decision.pk).response == {"amount": 3.5}
    assert finished(decided).output == {"amount": 3.5}
    submitted = ask(response_schema=schema)
    services.submit_function_responses(
        [{"id": submitted.pk, "name": "question", "response": {"amount": Decimal("12")}}],
        actor=ada,
    )
    assert finished(submitted).output == {"amount": 12}
