"""Changing an answer through the API (DESIGN 3.8): the plan, the rewind, the 409 bodies,
?status=superseded, and who may (a 404 for a question you may not see, 403 for one you see
but may not change)."""

import pytest

from workflows.models import Interrupt, Invocation, NodeRun

from .conftest import error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERER = "workflows.answer_interrupt"
REWINDER = "workflows.rewind_interrupt"


def answered(client, approved=True, user=None):
    question = pending(start(user=user))[0]
    response = client.post(
        "/api/function-responses/",
        {
            "function_responses": [
                {"id": question.id, "name": "a", "response": {"approved": approved}}
            ]
        },
        format="json",
    )
    assert response.status_code == 202, response.json()
    return question


def test_the_plan_then_the_rewind(client_for):
    person = user_with(ANSWERER, REWINDER, "workflows.view_invocation")
    client = client_for(person)
    question = answered(client, approved=True)
    plan = client.get(f"/api/interrupts/{question.id}/rewind/")
    assert plan.status_code == 200, plan.json()
    assert plan.json() == {
        "reopened": ["api_approval@1/approval@1", "api_approval@1"],
        "superseded": ["api_approval@1/outcome@1"],
        "questions": [],
        "effects": [],
    }
    changed = client.post(
        f"/api/interrupts/{question.id}/rewind/",
        {"response": {"approved": False}, "comment": "it was a mistake"},
        format="json",
    )
    assert changed.status_code == 202, changed.json()
    assert changed.json()["id"] == str(question.invocation_id)
    invocation = Invocation.objects.get(pk=question.invocation_id)
    assert invocation.output == {"approved": False}
    statuses = dict(NodeRun.objects.filter(invocation=invocation).values_list("path", "status"))
    assert statuses["api_approval@1/outcome@1"] == "SUPERSEDED"
    detail = client.get(f"/api/invocations/{invocation.pk}/")
    assert detail.status_code == 200, detail.json()
    assert {r["path"]: r["status"] for r in detail.json()["node_runs"]}[
        "api_approval@1/outcome@1"
    ] == ("SUPERSEDED")


def test_refusals_are_409_bodies_and_change_nothing(client_for):
    client = client_for(user_with(ANSWERER, REWINDER))
    question = pending(start())[0]
    before = snapshot()
    response = client.post(
        f"/api/interrupts/{question.id}/rewind/", {"response": {"approved": True}}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"] == "not_rewindable"
    assert response.json()["reason"] == "pending"
    assert snapshot() == before
    answered_one = answered(client)
    before = snapshot()
    bad = client.post(
        f"/api/interrupts/{answered_one.id}/rewind/",
        {"response": {"approved": "no"}},
        format="json",
    )
    assert error_of(bad)[:2] == (400, "invalid_response")
    no_response = client.post(f"/api/interrupts/{answered_one.id}/rewind/", {}, format="json")
    assert no_response.status_code == 400
    bad_confirm = client.post(
        f"/api/interrupts/{answered_one.id}/rewind/",
        {"response": {"approved": False}, "confirm_effects": "yes"},
        format="json",
    )
    assert error_of(bad_confirm)[:3] == (400, "invalid_request", "confirm_effects")
    missing = client.post("/api/interrupts/nope/rewind/", {"response": 1}, format="json")
    assert missing.status_code == 404
    reopen = client.post(f"/api/interrupts/{answered_one.id}/reopen/", {}, format="json")
    assert reopen.status_code == 409 and reopen.json()["reason"] == "not_decided"
    assert snapshot() == before


def test_who_may_change_it(client_for):
    answerer = client_for(user_with(ANSWERER))
    question = answered(answerer)
    before = snapshot()
    response = answerer.post(
        f"/api/interrupts/{question.id}/rewind/", {"response": {"approved": False}}, format="json"
    )
    assert response.status_code == 403
    assert answerer.get(f"/api/interrupts/{question.id}/rewind/").status_code == 403
    outsider = client_for(user_with(REWINDER))  # may not answer: does not see it
    assert outsider.get(f"/api/interrupts/{question.id}/rewind/").status_code == 404
    assert snapshot() == before


def test_superseded_questions_are_listed_and_refuse_answers(client_for):
    client = client_for(user_with(ANSWERER, REWINDER))
    invocation = start("api_pair")
    left, right = pending(invocation)
    for question in (left, right):
        response = client.post(
            "/api/function-responses/",
            {"function_responses": [{"id": question.id, "response": {"approved": True}}]},
            format="json",
        )
        assert response.status_code == 202, response.json()
    Interrupt.objects.filter(pk=right.id).update(status="superseded")
    listed = client.get("/api/interrupts/?status=superseded").json()["results"]
    assert [row["id"] for row in listed] == [right.id]
    again = client.post(
        "/api/function-responses/",
        {"function_responses": [{"id": right.id, "response": {"approved": True}}]},
        format="json",
    )
    assert error_of(again)[:2] == (409, "interrupt_superseded")
