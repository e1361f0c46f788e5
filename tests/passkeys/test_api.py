"""Signed decisions through the API: an interrupt says it needs a signature, `challenge/`
gives the options a passkey signs for an answer, `decisions/` takes the assertion; every
refusal is its own error code and changes nothing."""

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import error_of, snapshot, user_with
from tests.asking import ask
from tests.passkeys.conftest import enrol, last_issued, signature
from workflows.audit.assertions import b64url, from_b64url
from workflows.models import AuditEntry, Decision

pytestmark = pytest.mark.django_db(transaction=True)

YES = {"approved": True}


@pytest.fixture
def approver():
    return user_with("workflows.answer_interrupt", username="alice")


@pytest.fixture
def signed_question():
    return ask(message="Release the payment run?", require_signature=True)


def url(interrupt, action: str) -> str:
    return f"/api/interrupts/{interrupt.pk}/{action}/"


def test_the_interrupt_says_it_needs_a_signature(client_for, approver, signed_question):
    api = client_for(approver)
    assert api.get(f"/api/interrupts/{signed_question.pk}/").json()["require_signature"] is True
    listed = api.get("/api/interrupts/").json()["results"]
    assert [row["require_signature"] for row in listed] == [True]


def test_challenge_then_decision_with_the_assertion(client_for, approver, signed_question):
    _, key = enrol(approver)
    api = client_for(approver)
    body = {"response": YES, "comment": "run checked"}
    options = api.post(url(signed_question, "challenge"), body, format="json")
    assert options.status_code == 200, options.json()
    options = options.json()
    expected = last_issued(approver, signed_question, YES, "run checked")
    assert options["challenge"] == b64url(expected)
    assert options["rpId"] == "testserver"
    assert [c["id"] for c in options["allowCredentials"]] == [key.id]
    assertion = key.get(from_b64url(options["challenge"], "challenge"))
    decided = api.post(
        url(signed_question, "decisions"), {**body, "assertion": assertion}, format="json"
    )
    assert decided.status_code == 202, decided.json()
    assert decided.json()["interrupt_status"] == "resolved"
    entry = AuditEntry.objects.get(action="decision.recorded")
    assert entry.data["assertion"]["signature"] == assertion["response"]["signature"]


def test_a_decision_without_the_signature_is_refused(client_for, approver, signed_question):
    enrol(approver)
    before = snapshot()
    refused = client_for(approver).post(
        url(signed_question, "decisions"), {"response": YES}, format="json"
    )
    assert error_of(refused)[:2] == (403, "signature_required")
    assert snapshot() == before


def test_a_signature_that_does_not_hold_is_refused(client_for, approver, signed_question):
    _, key = enrol(approver)
    before = snapshot()
    wrong = signature(key, signed_question, {"approved": False})
    body = {"response": YES, "assertion": wrong}
    refused = client_for(approver).post(url(signed_question, "decisions"), body, format="json")
    assert error_of(refused)[:2] == (403, "invalid_signature")
    assert snapshot() == before
    assert not Decision.objects.exists()


def test_an_assertion_of_the_wrong_shape_is_a_bad_request(client_for, approver, signed_question):
    _, key = enrol(approver)
    assertion = signature(key, signed_question, YES)
    del assertion["response"]["signature"]
    body = {"response": YES, "assertion": assertion}
    refused = client_for(approver).post(url(signed_question, "decisions"), body, format="json")
    assert error_of(refused) == (400, "invalid_request", "assertion.response.signature")


def test_no_challenge_without_a_passkey(client_for, approver, signed_question):
    refused = client_for(approver).post(
        url(signed_question, "challenge"), {"response": YES}, format="json"
    )
    assert error_of(refused)[:2] == (403, "no_passkey")


def test_no_challenge_for_an_answer_the_question_does_not_take(
    client_for, approver, signed_question
):
    enrol(approver)
    body = {"response": {"approved": "maybe"}}
    refused = client_for(approver).post(url(signed_question, "challenge"), body, format="json")
    assert error_of(refused)[:2] == (400, "invalid_response")


def test_no_challenge_for_who_may_not_answer(client_for, approver):
    enrol(approver)
    theirs = ask(require_signature=True, assignees=["user:bob"])
    refused = client_for(approver).post(url(theirs, "challenge"), {"response": YES}, format="json")
    assert error_of(refused)[:2] == (404, "unknown_interrupt")  # not theirs to see


def test_the_schema_documents_the_challenge_and_the_assertion():
    schema = APIClient().get("/api/schema/?format=json").json()
    challenge = schema["paths"]["/api/interrupts/{id}/challenge/"]["post"]
    assert {"200", "400", "403", "404", "409"} <= set(challenge["responses"])
    decision = schema["components"]["schemas"]["DecisionRequest"]["properties"]
    assert "assertion" in decision
    assert "require_signature" in schema["components"]["schemas"]["InterruptDetail"]["properties"]
