"""Every endpoint needs a signed-in caller even where the host project keeps DRF's AllowAny,
the token endpoint aside; and a question that needs several approvals is not answered
through function-responses."""

import pytest
from django.contrib.auth.models import AnonymousUser
from rest_framework.permissions import AllowAny
from rest_framework.test import APIClient
from rest_framework.views import APIView

from tests.asking import ask
from workflows.models import Invocation
from workflows.policy import visible_invocations

from .conftest import error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)

OPEN_DEFAULTS = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
}


@pytest.fixture
def host_allows_anyone(settings, monkeypatch):
    """A host project that keeps DRF's default AllowAny. APIView read the setting when it
    was defined, so its class attribute is what such a host has."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, **OPEN_DEFAULTS}
    monkeypatch.setattr(APIView, "permission_classes", [AllowAny])


def endpoints(invocation: Invocation, interrupt_id: str) -> list[tuple[str, str, dict]]:
    answer = {"function_responses": [{"id": interrupt_id, "response": {"approved": True}}]}
    return [
        ("get", "/api/workflows/", {}),
        ("get", "/api/workflows/api_approval/", {}),
        ("post", "/api/invocations/", {"workflow": "api_approval", "input": {}}),
        ("get", "/api/invocations/", {}),
        ("get", f"/api/invocations/{invocation.pk}/", {}),
        ("get", f"/api/invocations/{invocation.pk}/events/", {}),
        ("post", f"/api/invocations/{invocation.pk}/cancel/", {}),
        ("post", f"/api/invocations/{invocation.pk}/retry/", {}),
        ("get", "/api/interrupts/", {}),
        ("get", f"/api/interrupts/{interrupt_id}/", {}),
        ("post", f"/api/interrupts/{interrupt_id}/decisions/", {"response": {"approved": True}}),
        ("post", f"/api/interrupts/{interrupt_id}/claim/", {}),
        ("post", f"/api/interrupts/{interrupt_id}/release/", {}),
        ("post", "/api/function-responses/", answer),
    ]


def test_anonymous_callers_get_401_everywhere_whatever_the_hosts_defaults(host_allows_anyone):
    invocation = start()  # started by the system: no starter, as an anonymous caller has none
    interrupt_id = pending(invocation)[0].id
    before = snapshot()
    for method, url, body in endpoints(invocation, interrupt_id):
        response = getattr(APIClient(), method)(url, body, format="json")
        assert error_of(response)[:2] == (401, "not_authenticated"), (method, url)
    assert snapshot() == before


def test_the_token_endpoint_stays_open_to_sign_in(host_allows_anyone):
    user = user_with()
    user.set_password("s3cret-pass")
    user.save()
    response = APIClient().post(
        "/api/token/", {"username": user.username, "password": "s3cret-pass"}, format="json"
    )
    assert response.status_code == 200 and response.json()["token"]


def test_nobody_signed_in_sees_no_invocation_the_system_started():
    start()
    assert not visible_invocations(AnonymousUser(), Invocation.objects.all()).exists()


def test_a_quorum_question_answered_through_function_responses_is_409(client_for):
    approver = user_with("workflows.answer_interrupt")
    question = ask(quorum=2)
    before = snapshot()
    response = client_for(approver).post(
        "/api/function-responses/",
        {"function_responses": [{"id": question.pk, "response": {"approved": True}}]},
        format="json",
    )
    assert error_of(response)[:2] == (409, "decision_required")
    assert "needs 2 approvals" in response.json()["detail"]
    assert snapshot() == before
    decided = client_for(approver).post(
        f"/api/interrupts/{question.pk}/decisions/", {"response": {"approved": True}}, format="json"
    )
    assert decided.status_code == 202 and decided.json()["interrupt_status"] == "pending"
