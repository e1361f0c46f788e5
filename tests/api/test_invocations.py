"""Invocations: start (202), the scoped list and its filters, detail with node runs and
open interrupts, events by cursor, cancel and retry, each with its error paths."""

from datetime import timedelta

import pytest
from django.utils import timezone

from workflows.models import Invocation

from .conftest import FLAKY, error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)


def test_start_answers_202_with_the_invocation_and_runs_it(api, operator):
    response = api.post(
        "/api/invocations/", {"workflow": "api_approval", "input": {"amount": 5}}, format="json"
    )
    assert response.status_code == 202
    body = response.json()
    assert body["workflow"] == "api_approval"
    assert body["input"] == {"amount": 5}
    assert body["started_by"] == operator.pk
    invocation = Invocation.objects.get(pk=body["id"])
    assert invocation.status == "WAITING"  # ran in-process after commit, up to the question


def test_start_needs_the_add_invocation_permission(client_for):
    client = client_for(user_with("workflows.answer_interrupt"))
    before = snapshot()
    response = client.post("/api/invocations/", {"workflow": "api_approval"}, format="json")
    assert error_of(response)[:2] == (403, "permission_denied")
    assert "workflows.add_invocation" in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"workflow": "no_such_flow"}, "unknown_workflow", "workflow"),
        ({"input": {}}, "invalid_request", "workflow"),
        ({"workflow": ["api_approval"]}, "invalid_request", "workflow"),
    ],
    ids=["unknown", "missing", "not-a-string"],
)
def test_start_with_a_bad_workflow_is_400_naming_the_field(api, body, code, field):
    before = snapshot()
    assert error_of(api.post("/api/invocations/", body, format="json")) == (400, code, field)
    assert snapshot() == before


def test_list_shows_only_what_the_caller_started(client_for, operator):
    mine = start(user=operator)
    start(user=user_with())
    response = client_for(operator).get("/api/invocations/")
    assert [row["id"] for row in response.json()["results"]] == [str(mine.pk)]


def test_the_view_permission_shows_every_invocation(client_for):
    start(user=user_with())
    start(user=user_with())
    viewer = client_for(user_with("workflows.view_invocation"))
    assert viewer.get("/api/invocations/").json()["count"] == 2


def test_list_filters(client_for, operator):
    approval = start("api_approval", user=operator)
    pair = start("api_pair", user=operator)
    other_user = user_with()
    start(user=other_user)
    client = client_for(user_with("workflows.view_invocation"))

    def ids(query: str) -> set[str]:
        response = client.get(f"/api/invocations/?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    assert ids("workflow=api_pair") == {str(pair.pk)}
    assert ids(f"started_by={operator.pk}") == {str(approval.pk), str(pair.pk)}
    assert len(ids("status=WAITING")) == 3
    assert ids("status=COMPLETED") == set()
    Invocation.objects.filter(pk=approval.pk).update(created_at=timezone.now() - timedelta(days=3))
    yesterday = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"created_before={yesterday}") == {str(approval.pk)}
    assert str(approval.pk) not in ids(f"created_after={yesterday}")


@pytest.mark.parametrize(
    "query", ["status=SLEEPING", "started_by=" + "me" * 76, "created_after=yesterday", "page=99"]
)
def test_bad_filters_and_pages_are_client_errors(api, query):
    status, code, _ = error_of(api.get(f"/api/invocations/?{query}"))
    assert (status, code) in {(400, "invalid_request"), (404, "not_found")}


def test_detail_has_node_runs_and_open_interrupts(api, operator):
    invocation = start("api_pair", user=operator)
    body = api.get(f"/api/invocations/{invocation.pk}/").json()
    assert {run["path"] for run in body["node_runs"]} == {
        "api_pair@1",
        "api_pair@1/left_review@1",
        "api_pair@1/right_review@1",
    }
    assert sorted(i["message"] for i in body["open_interrupts"]) == ["left review", "right review"]


@pytest.mark.parametrize("pk", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_unknown_invocation_is_404(api, pk):
    assert error_of(api.get(f"/api/invocations/{pk}/"))[:2] == (404, "unknown_invocation")


def test_someone_elses_invocation_is_404_to_a_caller_without_view_permission(client_for):
    invocation = start(user=user_with())
    client = client_for(user_with("workflows.add_invocation"))
    assert error_of(client.get(f"/api/invocations/{invocation.pk}/"))[:2] == (
        404,
        "unknown_invocation",
    )


def test_events_follow_a_cursor(api, operator):
    invocation = start("api_pair", user=operator)
    first = api.get(f"/api/invocations/{invocation.pk}/events/?page_size=1").json()
    assert len(first["results"]) == 1
    second = api.get(first["next"]).json()
    assert second["results"][0]["id"] > first["results"][0]["id"]
    every = api.get(f"/api/invocations/{invocation.pk}/events/").json()["results"]
    assert [e["id"] for e in every[:2]] == [first["results"][0]["id"], second["results"][0]["id"]]
    assert {e["author"] for e in every} == {"left_review", "right_review"}


def test_cancel_by_the_starter_then_a_second_cancel_conflicts(api, operator):
    invocation = start(user=operator)
    response = api.post(f"/api/invocations/{invocation.pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "CANCELLED"
    assert pending(invocation) == []
    before = snapshot()
    again = api.post(f"/api/invocations/{invocation.pk}/cancel/")
    assert error_of(again)[:2] == (409, "invalid_invocation_state")
    assert snapshot() == before


def test_cancel_of_someone_elses_invocation_needs_the_cancel_permission(client_for):
    invocation = start(user=user_with())
    viewer = client_for(user_with("workflows.view_invocation", "workflows.change_invocation"))
    before = snapshot()
    assert error_of(viewer.post(f"/api/invocations/{invocation.pk}/cancel/"))[0] == 403
    assert snapshot() == before
    manager = client_for(user_with("workflows.view_invocation", "workflows.cancel_invocation"))
    assert manager.post(f"/api/invocations/{invocation.pk}/cancel/").status_code == 200


def test_retry_re_drives_a_failed_invocation(api, operator):
    FLAKY["fail"] = True
    invocation = start("api_flaky", user=operator)
    assert invocation.status == "FAILED"
    FLAKY["fail"] = False
    response = api.post(f"/api/invocations/{invocation.pk}/retry/")
    assert response.status_code == 202
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == ("COMPLETED", {"ok": True})


def test_retry_of_an_invocation_that_did_not_fail_conflicts(api, operator):
    invocation = start(user=operator)
    before = snapshot()
    assert error_of(api.post(f"/api/invocations/{invocation.pk}/retry/"))[:2] == (
        409,
        "invalid_invocation_state",
    )
    assert snapshot() == before


def test_workflows_are_listed_with_their_graph(api):
    body = api.get("/api/workflows/?page_size=500").json()
    pair = next(row for row in body["results"] if row["name"] == "api_pair")
    assert {node["name"] for node in pair["graph"]["nodes"]} >= {"left_review", "both", "summary"}
    assert {"source": "api_pair/both", "target": "api_pair/summary", "route": None} in pair[
        "graph"
    ]["edges"]
    detail = api.get("/api/workflows/api_pair/").json()
    assert detail["version"] == pair["version"]
    assert error_of(api.get("/api/workflows/nope/"))[:2] == (404, "unknown_workflow")
