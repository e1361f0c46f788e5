"""A gate's answer bound to the action it approves (DESIGN 4.5, the envelope's
`action_fingerprint`): an answer given for one proposal never approves another, whichever
door carries it."""

import pytest

from tests.api.conftest import client_for, error_of, snapshot
from tests.asking import ask
from tests.gates.gated import REFUND, pending
from tests.gates.test_services import support
from workflows import services
from workflows.engine.errors import ResponseValidationError
from workflows.models import Decision
from workflows.protocols import envelope
from workflows.services.grants import action_fingerprint

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["client_for"]  # the API tests' fixture

APPROVE = {"decision": "approve"}


def test_an_approval_for_the_action_shown_is_recorded():
    sue = support("sue")
    question = pending(services.start(REFUND, {"amount": 40, "customer": "ann"}))
    shown = envelope(question, sue)

    decision = services.decide(
        question.pk, APPROVE, actor=sue, action_fingerprint=shown["action_fingerprint"]
    )

    assert decision.interrupt.status == "resolved"


def test_an_approval_for_another_action_is_refused_and_nothing_stored():
    sue = support("sue")
    question = pending(services.start(REFUND, {"amount": 40, "customer": "ann"}))
    other = action_fingerprint({"node": "refund", "args": {"amount": 4000, "customer": "ann"}})
    before = snapshot()

    with pytest.raises(ResponseValidationError) as refused:
        services.decide(question.pk, APPROVE, actor=sue, action_fingerprint=other)

    assert refused.value.field == "action_fingerprint"
    assert snapshot() == before and not Decision.objects.exists()


def test_a_fingerprint_given_for_a_question_that_is_no_gate_is_refused():
    approver = support("sue")
    question = ask(assignees=["user:sue"])

    with pytest.raises(ResponseValidationError):
        services.decide(
            question.pk,
            {"approved": True},
            actor=approver,
            action_fingerprint=action_fingerprint({"node": "x", "args": {}}),
        )
    assert not Decision.objects.exists()


def test_the_api_refuses_an_approval_for_another_action(client_for):
    sue = support("sue")
    question = pending(services.start(REFUND, {"amount": 40, "customer": "ann"}))
    before = snapshot()

    response = client_for(sue).post(
        f"/api/interrupts/{question.pk}/decisions/",
        {"response": APPROVE, "action_fingerprint": "0" * 64},
        format="json",
    )

    assert error_of(response) == (400, "invalid_response", "action_fingerprint")
    assert snapshot() == before
