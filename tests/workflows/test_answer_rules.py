"""Who is a person and what a person may not do: a question that needs several approvals
takes decisions only, an anonymous or inactive user changes nothing, and the assignees are
counted as distinct people who must be able to reach the quorum."""

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied

from tests.asking import APPROVAL, WORKFLOW, ask
from tests.factories import ApproverFactory, StaffFactory
from tests.workflows.test_decisions import refused
from workflows import services
from workflows.engine import FunctionResponse, RequestInput
from workflows.engine.errors import DecisionRequiredError, ResponseValidationError
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def answer(interrupt: Interrupt, approved: bool = True) -> list[FunctionResponse]:
    return [FunctionResponse(interrupt.pk, "question", {"approved": approved})]


def in_group(name: str, *users) -> None:
    Group.objects.get_or_create(name=name)[0].user_set.add(*users)


# --- a quorum is answered by decisions ----------------------------------------------------------


def test_a_person_may_not_answer_a_quorum_question_directly():
    ann = ApproverFactory(username="ann")
    interrupt = ask(quorum=2)
    error = refused(
        lambda: services.submit_function_responses(answer(interrupt), actor=ann),
        DecisionRequiredError,
        "needs 2 approvals",
    )
    assert (error.code, error.interrupt_id, error.quorum) == ("decision_required", interrupt.pk, 2)


def test_a_superuser_may_not_answer_a_quorum_question_directly_either():
    interrupt = ask(quorum=3)
    refused(
        lambda: services.submit_function_responses(answer(interrupt), actor=StaffFactory()),
        DecisionRequiredError,
        "needs 3 approvals",
    )


def test_the_answer_rule_is_asked_before_the_quorum():
    outsider = ApproverFactory(username="outsider")
    interrupt = ask(quorum=2, assignees=["user:ann", "user:ben"])
    refused(
        lambda: services.submit_function_responses(answer(interrupt), actor=outsider),
        PermissionDenied,
        "not among the assignees",
    )


def test_decisions_reach_the_answer_of_a_quorum_question():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    interrupt = ask(quorum=2)
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    decision = services.decide(interrupt.pk, {"approved": True}, actor=ben)
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert decision.interrupt.resolved_by == ben
    output = Invocation.objects.get(pk=interrupt.invocation_id).output
    assert [d["actor"] for d in output["decisions"]] == ["ann", "ben"]


def test_the_system_may_still_answer_a_quorum_question():
    interrupt = ask(quorum=2)
    services.submit_function_responses(answer(interrupt, approved=False), actor=None)
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, {"approved": False})


# --- only None is the system ------------------------------------------------------------------


@pytest.mark.parametrize("who", ["anonymous", "inactive"])
def test_an_anonymous_or_inactive_user_changes_nothing_through_any_service(who):
    starter = StaffFactory(username="starter")
    # Not even a superuser's rights once inactive.
    person = AnonymousUser() if who == "anonymous" else StaffFactory(username="gone")
    if who == "inactive":
        person.is_active = False
        person.save()
    interrupt = ask(user=starter)
    services.claim(interrupt.pk, actor=starter)
    failed = services.start(WORKFLOW, {"request": {"quorum": 0}}, user=starter)
    message = "anonymous user may change nothing" if who == "anonymous" else "gone is inactive"
    calls = [
        lambda: services.submit_function_responses(answer(interrupt), actor=person),
        lambda: services.decide(interrupt.pk, {"approved": True}, actor=person),
        lambda: services.claim(interrupt.pk, actor=person),
        lambda: services.release(interrupt.pk, actor=person),
        lambda: services.reassign(interrupt.pk, [], actor=person),
        lambda: services.cancel(interrupt.invocation_id, actor=person),
        lambda: services.retry(failed, actor=person),
        lambda: services.start(WORKFLOW, {"request": {}}, user=person),
    ]
    for call in calls:
        refused(call, PermissionDenied, message)


def test_an_anonymous_user_is_refused_before_an_unknown_id_is_looked_up():
    refused(
        lambda: services.decide("no-such-question", {"approved": True}, actor=AnonymousUser()),
        PermissionDenied,
        "anonymous",
    )


# --- distinct principals and a reachable quorum -------------------------------------------------


def test_an_assignee_named_twice_counts_once():
    request = RequestInput(response_schema=APPROVAL, assignees=["user:a", "group:g", "user:a"])
    assert request.assignees == ["user:a", "group:g"]
    with pytest.raises(ValueError, match="quorum 2 cannot be met by the 1 assigned user"):
        RequestInput(response_schema=APPROVAL, assignees=["user:a", "user:a"], quorum=2)


def test_a_quorum_its_groups_cannot_reach_fails_the_asking_node():
    ann = ApproverFactory(username="ann")
    in_group("ops", ann, ApproverFactory(username="gone", is_active=False))
    with pytest.raises(Interrupt.DoesNotExist):
        ask(assignees=["group:ops", "user:ann"], quorum=2)
    invocation = Invocation.objects.get()
    assert invocation.status == NodeStatus.FAILED
    assert "quorum 2 cannot be met: 1 active user(s) among group:ops, user:ann" in invocation.error

    in_group("ops", ApproverFactory(username="ben"))
    interrupt = ask(assignees=["group:ops", "user:ann"], quorum=2)
    assert interrupt.status == InterruptStatus.PENDING


def test_the_starter_of_a_four_eyes_question_is_not_counted():
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    in_group("ops", ann, ben)
    with pytest.raises(Interrupt.DoesNotExist):
        ask(user=ann, assignees=["group:ops"], quorum=2, four_eyes=True)
    assert "quorum 2 cannot be met" in Invocation.objects.get().error
    assert ask(user=ann, assignees=["group:ops"], quorum=2).status == InterruptStatus.PENDING


def test_reassign_refuses_assignees_that_cannot_reach_the_quorum():
    ann, ben, cy = (ApproverFactory(username=name) for name in ("ann", "ben", "cy"))
    in_group("pair", ann, ben)
    in_group("solo", cy)
    interrupt = ask(assignees=["group:pair"], quorum=2)
    for assignees, match in [
        (["group:solo"], "quorum 2 cannot be met: 1 active user"),
        (["user:cy", "user:cy"], "quorum 2 cannot be met by the 1 assigned user"),
    ]:
        error = refused(
            lambda a=assignees: services.reassign(interrupt.pk, a, actor=ann),
            ResponseValidationError,
            match,
        )
        assert error.field == "assignees"
    # One approval given: one more person is enough, and who approved is not counted again.
    services.decide(interrupt.pk, {"approved": True}, actor=ann)
    in_group("ann_alone", ann)
    refused(
        lambda: services.reassign(interrupt.pk, ["group:ann_alone"], actor=ann),
        ResponseValidationError,
        "1 approval\\(s\\) so far and 0 active user",
    )
    moved = services.reassign(interrupt.pk, ["group:solo", "group:solo"], actor=ann)
    assert moved.assignees == ["group:solo"]
    services.decide(interrupt.pk, {"approved": True}, actor=cy)
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.RESOLVED
