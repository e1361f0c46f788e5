"""services: the one write path. Each bad submission raises a named error and leaves
every table as it was."""

import pickle

import pytest
from django.contrib.auth.models import Group
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import StaffFactory
from workflows import services
from workflows.engine.errors import (
    InputValidationError,
    InterruptNotPendingError,
    InvocationStateError,
    MultipleInvocationsError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, Session, SessionEvent
from workflows.registry import UnknownWorkflowError

pytestmark = pytest.mark.django_db(transaction=True)

EXPENSE = {"employee": "Ada", "amount": 420.0}


def snapshot() -> str:
    rows = [
        *Session.objects.all(),
        *Invocation.objects.all(),
        *NodeRun.objects.all(),
        *SessionEvent.objects.all(),
        *Interrupt.objects.all(),
    ]
    return serializers.serialize("json", rows)


def waiting_expense(**overrides):
    invocation = services.start("test_expense", {**EXPENSE, **overrides})
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.WAITING
    return invocation, Interrupt.objects.get(invocation=invocation)


def answer(interrupt_id: str, response, name: str = "manager_approval") -> dict:
    return {"id": interrupt_id, "name": name, "response": response}


def test_start_runs_until_the_first_question():
    invocation, question = waiting_expense()
    assert question.status == InterruptStatus.PENDING
    assert question.path == "test_expense@1/manager_approval@1"
    assert question.response_schema["required"] == ["approved"]
    assert question.message.startswith("Approve an expense of 420.00")
    paths = dict(NodeRun.objects.filter(invocation=invocation).values_list("path", "status"))
    assert paths == {
        "test_expense@1": "WAITING",
        "test_expense@1/prepare@1": "COMPLETED",
        "test_expense@1/manager_approval@1": "WAITING",
    }


def test_answer_resumes_and_completes_with_the_routed_branch():
    user = StaffFactory()
    user.groups.add(Group.objects.get_or_create(name="managers")[0])  # the assignees
    invocation, question = waiting_expense()
    services.submit_function_responses([answer(question.id, {"approved": True})], actor=user)
    invocation.refresh_from_db()
    question.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output["status"] == "reimbursed"
    assert question.status == InterruptStatus.RESOLVED
    assert question.resolved_by == user
    assert question.consumed
    assert not NodeRun.objects.filter(invocation=invocation, name="notify_rejection").exists()


def test_the_returned_invocation_is_read_once_when_first_used():
    invocation, question = waiting_expense()
    returned = services.submit_function_responses([answer(question.id, {"approved": True})])
    with CaptureQueriesContext(connection) as reads:
        assert returned.pk == invocation.pk  # the id alone: no read
    assert len(reads) == 0
    Invocation.objects.filter(pk=invocation.pk).update(error="changed after the answer")
    with CaptureQueriesContext(connection) as reads:
        assert returned.status == NodeStatus.COMPLETED
        assert returned.output["status"] == "reimbursed"
        assert returned.error == "changed after the answer"  # as it is when read
    assert len(reads) == 1  # every field at once
    returned.refresh_from_db()  # Django's own from then on
    assert returned.error == "changed after the answer"
    assert pickle.loads(pickle.dumps(returned)).status == NodeStatus.COMPLETED


def test_identical_repeat_is_an_idempotent_success():
    invocation, question = waiting_expense()
    services.submit_function_responses([answer(question.id, {"approved": False})])
    before = snapshot()
    again = services.submit_function_responses(
        [answer(question.id, {"result": '{"approved": false}'})]
    )
    assert again.pk == invocation.pk
    assert snapshot() == before


@pytest.mark.parametrize(
    ("responses", "error", "message"),
    [
        ([answer("no-such-id", {"approved": True})], UnknownInterruptError, "no-such-id"),
        ([{"name": "x", "response": {}}], ResponseValidationError, "id"),
        ([], ResponseValidationError, "at least one"),
    ],
)
def test_malformed_submissions_change_nothing(responses, error, message):
    waiting_expense()
    before = snapshot()
    with pytest.raises(error, match=message):
        services.submit_function_responses(responses)
    assert snapshot() == before


def test_invalid_payload_names_the_field_and_changes_nothing():
    _, question = waiting_expense()
    before = snapshot()
    with pytest.raises(ResponseValidationError) as raised:
        services.submit_function_responses([answer(question.id, {"approved": "yes"})])
    assert raised.value.field == "approved"
    assert "'yes' is not of type 'boolean'" in str(raised.value)
    with pytest.raises(ResponseValidationError) as raised:
        services.submit_function_responses([answer(question.id, {"comment": "ok"})])
    assert raised.value.field == "approved"
    assert snapshot() == before


def test_conflicting_repeat_is_refused():
    _, question = waiting_expense()
    services.submit_function_responses([answer(question.id, {"approved": True})])
    before = snapshot()
    with pytest.raises(InterruptNotPendingError, match="answered differently"):
        services.submit_function_responses([answer(question.id, {"approved": False})])
    assert snapshot() == before


def test_answers_for_two_invocations_are_refused_whole():
    _, first = waiting_expense()
    _, second = waiting_expense(employee="Grace")
    before = snapshot()
    with pytest.raises(MultipleInvocationsError):
        services.submit_function_responses(
            [answer(first.id, {"approved": True}), answer(second.id, {"approved": True})]
        )
    assert snapshot() == before


def test_start_refuses_unknown_workflows_and_non_json_input():
    before = snapshot()
    with pytest.raises(UnknownWorkflowError, match="nope"):
        services.start("nope", {})
    with pytest.raises(InputValidationError, match="type object cannot be stored as JSON"):
        services.start("test_expense", {"when": object()})
    assert snapshot() == before


def test_cancel_closes_questions_and_refuses_late_answers():
    invocation, question = waiting_expense()
    services.cancel(invocation)
    invocation.refresh_from_db()
    question.refresh_from_db()
    assert invocation.status == NodeStatus.CANCELLED
    assert question.status == InterruptStatus.CANCELLED
    assert set(NodeRun.objects.filter(invocation=invocation).values_list("status", flat=True)) == {
        "COMPLETED",
        "CANCELLED",
    }
    with pytest.raises(InterruptNotPendingError, match="cancelled"):
        services.submit_function_responses([answer(question.id, {"approved": True})])
    with pytest.raises(InvocationStateError, match="cannot cancel"):
        services.cancel(invocation)


def test_retry_refuses_an_invocation_that_did_not_fail():
    invocation, _ = waiting_expense()
    before = snapshot()
    with pytest.raises(InvocationStateError, match="cannot retry"):
        services.retry(invocation)
    assert snapshot() == before


def test_signals_fire_after_commit():
    from workflows import signals

    received = []

    def listener(signal):
        def receive(sender, **kwargs):
            received.append((signal, kwargs.get("status")))

        return receive

    receivers = {
        name: listener(name)
        for name in ("interrupt_opened", "interrupt_resolved", "invocation_finished")
    }
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    try:
        _, question = waiting_expense()
        services.submit_function_responses([answer(question.id, {"approved": True})])
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    assert received == [
        ("interrupt_opened", None),
        ("interrupt_resolved", "resolved"),
        ("invocation_finished", "COMPLETED"),
    ]


def test_node_bodies_may_use_the_orm():
    from django.contrib.auth import get_user_model

    from workflows.engine import RequestInput, Workflow, node
    from workflows.registry import registry

    @node
    def create_account(node_input):
        return get_user_model().objects.create(username=node_input).pk

    @node
    def confirm(node_input):
        user = get_user_model().objects.get(pk=node_input)
        yield RequestInput(message=f"Activate {user.username}?", response_schema=bool)

    @node
    def count_accounts(node_input):
        return {"activate": node_input, "accounts": get_user_model().objects.count()}

    registry.register(
        Workflow(name="accounts", edges=[("START", create_account, confirm, count_accounts)])
    )
    try:
        invocation = services.start("accounts", "grace")
        question = Interrupt.objects.get(invocation=invocation)
        assert question.message == "Activate grace?"
        services.submit_function_responses([{"id": question.id, "response": True}])
    finally:
        registry.unregister("accounts")
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"activate": True, "accounts": 1}


def test_a_user_answering_directly_must_be_allowed_to_answer():
    """DESIGN 4.1: machine answers go through the same rule for the calling user."""
    outsider = StaffFactory()  # a superuser, but not among the assignees
    _invocation, question = waiting_expense()
    before = snapshot()
    with pytest.raises(PermissionDenied, match="not among the assignees"):
        services.submit_function_responses(
            [answer(question.id, {"approved": True})], actor=outsider
        )
    assert snapshot() == before
