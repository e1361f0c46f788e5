"""The grants endpoints: `GET/POST grants/`, `POST grants/{id}/revoke/`; a gate's question
through `POST interrupts/{id}/decisions/`, remembering an approval."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import error_of, pending, snapshot, start, user_with
from tests.gates.gated import REFUND
from workflows.models import Grant

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSAL = {"amount": 40, "customer": "ann"}


def test_a_decision_that_remembers_an_approval_makes_a_grant_listed_for_its_granter(client_for):
    ada = user_with("workflows.answer_interrupt", groups=("support",))
    other = user_with("workflows.answer_interrupt", groups=("support",))
    (question,) = pending(start(REFUND, PROPOSAL))
    answer = {"decision": "approve", "remember": "session", "uses_left": 3}
    response = client_for(ada).post(
        f"/api/interrupts/{question.pk}/decisions/", {"response": answer}, format="json"
    )
    assert response.status_code == 202, response.json()
    (grant,) = client_for(ada).get("/api/grants/").json()["results"]
    assert grant["workflow_name"] == REFUND and grant["node_name"] == "refund"
    assert (grant["scope"], grant["granted_by"], grant["uses_left"]) == ("session", ada.username, 3)
    assert grant["scope_id"] == str(question.invocation.session_id)
    assert grant["live"] is True
    assert client_for(other).get("/api/grants/").json()["results"] == []


def test_remembering_always_without_add_grant_is_403_and_stores_nothing(client_for):
    ada = user_with("workflows.answer_interrupt", groups=("support",))
    (question,) = pending(start(REFUND, PROPOSAL))
    before = snapshot()
    response = client_for(ada).post(
        f"/api/interrupts/{question.pk}/decisions/",
        {"response": {"decision": "approve", "remember": "always"}},
        format="json",
    )
    assert error_of(response)[:2] == (403, "permission_denied")
    assert snapshot() == before and not Grant.objects.exists()


def test_an_invalid_edit_is_400_naming_the_field(client_for):
    ada = user_with("workflows.answer_interrupt", groups=("support",))
    (question,) = pending(start(REFUND, PROPOSAL))
    response = client_for(ada).post(
        f"/api/interrupts/{question.pk}/decisions/",
        {"response": {"decision": "edit", "args": {"amount": -1, "customer": "ann"}}},
        format="json",
    )
    assert error_of(response) == (400, "invalid_response", "args.amount")


def test_posting_a_grant_needs_add_grant_and_a_gate_that_allows_its_scope(client_for):
    plain = user_with("workflows.answer_interrupt")
    boss = user_with("workflows.add_grant")
    body = {"workflow_name": REFUND, "node_name": "refund", "scope": "always"}
    assert error_of(client_for(plain).post("/api/grants/", body, format="json"))[0] == 403
    assert error_of(
        client_for(boss).post("/api/grants/", {**body, "node_name": "revise"}, format="json")
    ) == (400, "invalid_grant", "node_name")
    unknown = {**body, "workflow_name": "no_such_workflow"}
    assert error_of(client_for(boss).post("/api/grants/", unknown, format="json")) == (
        400,
        "unknown_workflow",
        "workflow_name",
    )
    assert error_of(
        client_for(boss).post("/api/grants/", {**body, "scope": "forever"}, format="json")
    )[:2] == (400, "invalid_request")
    assert error_of(
        client_for(boss).post(
            "/api/grants/", {**body, "expires_at": "2001-01-01T00:00:00Z"}, format="json"
        )
    ) == (400, "invalid_grant", "expires_at")
    in_a_month = timezone.now() + timedelta(days=30)
    made = client_for(boss).post(
        "/api/grants/",
        {
            **body,
            "pins": {"properties": {"amount": {"maximum": 50}}},
            "expires_at": in_a_month.isoformat(),
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    assert made.json()["pins"] == {"properties": {"amount": {"maximum": 50}}}
    assert made.json()["expires_at"].startswith(in_a_month.date().isoformat())
    assert Grant.objects.get().granted_by == boss


def test_revoking_is_for_the_granter_or_change_grant_and_unknown_is_404(client_for):
    ada = user_with("workflows.answer_interrupt")
    ben = user_with("workflows.answer_interrupt")
    keeper = user_with("workflows.change_grant")
    grant = Grant.objects.create(
        workflow_name=REFUND, node_name="refund", scope="always", granted_by=ada
    )
    url = f"/api/grants/{grant.pk}/revoke/"
    assert error_of(client_for(ben).post(url))[:2] == (403, "permission_denied")
    grant.refresh_from_db()
    assert grant.revoked_at is None
    revoked = client_for(ada).post(url)
    assert revoked.status_code == 200
    assert (revoked.json()["revoked_by"], revoked.json()["live"]) == (ada.username, False)
    other = Grant.objects.create(workflow_name=REFUND, node_name="refund", scope="always")
    assert client_for(keeper).post(f"/api/grants/{other.pk}/revoke/").status_code == 200
    assert error_of(client_for(keeper).post("/api/grants/nope/revoke/"))[:2] == (
        404,
        "unknown_grant",
    )


def test_the_grants_list_filters_live_ones(client_for):
    keeper = user_with("workflows.view_grant")
    Grant.objects.create(workflow_name=REFUND, node_name="refund", scope="always")
    Grant.objects.create(workflow_name=REFUND, node_name="refund", scope="always", uses_left=0)
    listed = client_for(keeper).get("/api/grants/?live=true").json()["results"]
    assert [g["uses_left"] for g in listed] == [None]
    ended = client_for(keeper).get("/api/grants/?live=false").json()["results"]
    assert [g["uses_left"] for g in ended] == [0]


def _nested(levels: int) -> dict:
    pins: dict = {}
    for _ in range(levels):
        pins = {"not": pins}
    return pins


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"ttl_seconds": 10**15}, "ttl_seconds"),
        ({"uses_left": 10**12}, "uses_left"),
        ({"expires_at": "9999-01-01T00:00:00Z"}, "expires_at"),
        ({"pins": {"$ref": "#/nowhere"}}, "pins"),
        ({"pins": _nested(200)}, "pins"),
    ],
)
def test_posting_a_grant_that_cannot_be_kept_is_a_named_400(client_for, given, field):
    boss = user_with("workflows.add_grant")
    body = {"workflow_name": REFUND, "node_name": "refund", "scope": "always", **given}
    before = snapshot()
    response = client_for(boss).post("/api/grants/", body, format="json")
    assert error_of(response) == (400, "invalid_grant", field)
    assert snapshot() == before and not Grant.objects.exists()


def test_an_edit_through_the_api_checks_the_schemas_formats(client_for):
    from tests.gates.gated import MAIL

    ada = user_with("workflows.answer_interrupt")
    (question,) = pending(start(MAIL, {"to": "ann@example.com"}))
    before = snapshot()
    edit = {"decision": "edit", "args": {"to": "not an email"}}
    response = client_for(ada).post(
        f"/api/interrupts/{question.pk}/decisions/", {"response": edit}, format="json"
    )
    assert error_of(response) == (400, "invalid_response", "args.to")
    response = client_for(ada).post(
        "/api/function-responses/",
        {"function_responses": [{"id": question.pk, "response": edit}]},
        format="json",
    )
    assert error_of(response)[:2] == (400, "invalid_response")
    assert snapshot() == before


def test_an_expiry_with_a_utc_offset_postgresql_refuses_is_400_naming_it(client_for):
    boss = user_with("workflows.add_grant")
    body = {"workflow_name": REFUND, "node_name": "refund", "scope": "always"}
    response = client_for(boss).post(
        "/api/grants/", {**body, "expires_at": "2999-01-01T00:00:00+16:00"}, format="json"
    )
    assert error_of(response) == (400, "invalid_request", "expires_at")
    assert "UTC offset +16:00" in response.json()["detail"]
    assert not Grant.objects.exists()
