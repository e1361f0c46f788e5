"""Interrupts: the inbox scoped by the DESIGN 4.1 rule, detail with the answer's schema,
decisions, claim and release; function responses (machine answers), one or several."""

import pytest

from workflows.models import Decision, Interrupt

from .conftest import DECISION_SCHEMA, error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERER = "workflows.answer_interrupt"


def inbox(client) -> set[str]:
    response = client.get("/api/interrupts/?status=pending")
    assert response.status_code == 200, response.json()
    return {row["id"] for row in response.json()["results"]}


def test_inbox_lists_what_the_caller_may_answer(client_for):
    starter = user_with()
    open_to_all = pending(start(user=starter))[0]
    for_bob = pending(start(node_input={"assignees": ["user:bob"]}, user=starter))[0]
    for_finance = pending(start(node_input={"assignees": ["group:finance"]}, user=starter))[0]

    anyone = client_for(user_with(ANSWERER))
    bob = client_for(user_with(ANSWERER, username="bob"))
    finance = client_for(user_with(ANSWERER, groups=("finance",)))
    no_permission = client_for(user_with(username="alice"))

    assert inbox(anyone) == {open_to_all.id}
    assert inbox(bob) == {open_to_all.id, for_bob.id}
    assert inbox(finance) == {open_to_all.id, for_finance.id}
    assert inbox(no_permission) == set()


def test_four_eyes_hides_the_question_from_who_started_it(client_for):
    starter = user_with(ANSWERER)
    question = pending(start(node_input={"four_eyes": True}, user=starter))[0]
    assert inbox(client_for(starter)) == set()
    assert inbox(client_for(user_with(ANSWERER))) == {question.id}
    refused = client_for(starter).post(
        f"/api/interrupts/{question.id}/decisions/", {"response": {"approved": True}}, format="json"
    )
    assert error_of(refused)[:2] == (404, "unknown_interrupt")  # hidden, as in the inbox


def test_inbox_filters(api, operator):
    approval = start(user=operator)
    start("api_pair", user=operator)
    rows = api.get("/api/interrupts/?workflow=api_pair&status=pending").json()["results"]
    assert {row["message"] for row in rows} == {"left review", "right review"}
    rows = api.get(f"/api/interrupts/?invocation={approval.pk}").json()["results"]
    assert [row["id"] for row in rows] == [pending(approval)[0].id]
    assert error_of(api.get("/api/interrupts/?status=sleeping"))[:2] == (400, "invalid_request")


def test_detail_carries_payload_and_response_schema(api, operator):
    question = pending(start(node_input={"amount": 42}, user=operator))[0]
    body = api.get(f"/api/interrupts/{question.id}/").json()
    assert body["response_schema"] == DECISION_SCHEMA
    assert body["payload"] == {"amount": 42}
    assert body["message"] == "Approve?"


def test_unknown_or_unanswerable_interrupt_detail_is_404(api, client_for):
    assert error_of(api.get("/api/interrupts/nope/"))[:2] == (404, "unknown_interrupt")
    question = pending(start(node_input={"assignees": ["user:carol"]}))[0]
    assert error_of(api.get(f"/api/interrupts/{question.id}/"))[:2] == (404, "unknown_interrupt")


def test_a_decision_answers_and_the_invocation_resumes(api, operator):
    invocation = start(user=operator)
    question = pending(invocation)[0]
    response = api.post(
        f"/api/interrupts/{question.id}/decisions/",
        {"response": {"approved": True}, "comment": "fine"},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["interrupt_status"] == "resolved"
    assert response.json()["comment"] == "fine"
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == ("COMPLETED", {"approved": True})


def test_decision_errors_change_nothing(api, operator, client_for):
    question = pending(start(user=operator))[0]
    url = f"/api/interrupts/{question.id}/decisions/"
    before = snapshot()
    cases = [
        (api.post(url, {"response": {"approved": "yes"}}, format="json"), 400, "approved"),
        (api.post(url, {"comment": "no answer"}, format="json"), 400, "response"),
        (api.post("/api/interrupts/nope/decisions/", {"response": {}}, format="json"), 404, None),
        (
            client_for(user_with()).post(url, {"response": {"approved": True}}, format="json"),
            404,  # a question the caller may not see: as its detail
            None,
        ),
    ]
    for response, status, field in cases:
        assert error_of(response)[0] == status
        assert error_of(response)[2] == field
    assert snapshot() == before


def test_a_second_decision_is_409(api, operator):
    question = pending(start(user=operator))[0]
    url = f"/api/interrupts/{question.id}/decisions/"
    assert api.post(url, {"response": {"approved": True}}, format="json").status_code == 202
    before = snapshot()
    response = api.post(url, {"response": {"approved": False}}, format="json")
    assert error_of(response)[:2] in {(409, "already_decided"), (409, "interrupt_not_pending")}
    assert snapshot() == before
    assert Decision.objects.count() == 1


def test_claim_and_release(client_for, operator):
    question = pending(start(user=operator))[0]
    alice = client_for(user_with(ANSWERER, username="alice"))
    bob = client_for(user_with(ANSWERER, username="bob"))
    claimed = alice.post(f"/api/interrupts/{question.id}/claim/")
    assert claimed.status_code == 200
    assert claimed.json()["claimed_by"] is not None
    before = snapshot()
    assert error_of(bob.post(f"/api/interrupts/{question.id}/claim/"))[:2] == (
        409,
        "already_claimed",
    )
    assert error_of(bob.post(f"/api/interrupts/{question.id}/release/"))[0] == 403
    assert snapshot() == before
    released = alice.post(f"/api/interrupts/{question.id}/release/")
    assert released.status_code == 200
    assert released.json()["claimed_by"] is None


def test_claim_needs_the_answer_rule(client_for):
    question = pending(start(node_input={"assignees": ["user:dave"]}))[0]
    before = snapshot()
    client = client_for(user_with(ANSWERER))
    # A question the caller may not answer is one they may not see: 404, as its detail.
    assert error_of(client.post(f"/api/interrupts/{question.id}/claim/"))[:2] == (
        404,
        "unknown_interrupt",
    )
    assert snapshot() == before


def answers(*pairs):
    return {"function_responses": [{"id": i, "name": "x", "response": r} for i, r in pairs]}


def test_function_responses_one_then_the_other(api, operator):
    invocation = start("api_pair", user=operator)
    left, right = pending(invocation)
    response = api.post(
        "/api/function-responses/", answers((left.id, {"approved": True})), format="json"
    )
    assert response.status_code == 202
    assert response.json()["interrupts"] == [left.id]
    assert [i.id for i in pending(invocation)] == [right.id]
    api.post("/api/function-responses/", answers((right.id, {"approved": False})), format="json")
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == ("COMPLETED", {"approved": False})


def test_function_responses_several_at_once(api, operator):
    invocation = start("api_pair", user=operator)
    left, right = pending(invocation)
    body = answers((left.id, {"approved": True}), (right.id, {"approved": True}))
    assert api.post("/api/function-responses/", body, format="json").status_code == 202
    invocation.refresh_from_db()
    assert invocation.status == "COMPLETED"


def test_identical_repeat_is_accepted_a_different_one_conflicts(api, operator):
    question = pending(start(user=operator))[0]
    body = answers((question.id, {"approved": True}))
    assert api.post("/api/function-responses/", body, format="json").status_code == 202
    before = snapshot()
    assert api.post("/api/function-responses/", body, format="json").status_code == 202
    other = api.post(
        "/api/function-responses/", answers((question.id, {"approved": False})), format="json"
    )
    assert error_of(other)[:2] == (409, "interrupt_not_pending")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("make_body", "status", "code", "field"),
    [
        (lambda q, o: answers(("nope", {"approved": True})), 404, "unknown_interrupt", None),
        (lambda q, o: answers((q.id, {"approved": "yes"})), 400, "invalid_response", "approved"),
        (
            lambda q, o: answers((q.id, {"approved": True}), (o.id, {"approved": True})),
            400,
            "multiple_invocations",
            "function_responses",
        ),
        (lambda q, o: {"function_responses": []}, 400, "invalid_request", "function_responses"),
        (
            lambda q, o: {"function_responses": [{"id": q.id}]},
            400,
            "invalid_request",
            "function_responses.0.response",
        ),
        (
            lambda q, o: {"function_responses": {"id": q.id, "response": 1}},
            400,
            "invalid_request",
            "function_responses",
        ),
    ],
    ids=["unknown", "invalid", "two-invocations", "empty", "no-response", "not-a-list"],
)
def test_bad_function_responses_change_nothing(api, operator, make_body, status, code, field):
    question = pending(start(user=operator))[0]
    other = pending(start(user=operator))[0]
    before = snapshot()
    response = api.post("/api/function-responses/", make_body(question, other), format="json")
    assert error_of(response) == (status, code, field)
    assert snapshot() == before


def test_function_responses_use_the_answer_rule(client_for):
    question = pending(start(node_input={"assignees": ["user:erin"]}))[0]
    before = snapshot()
    response = client_for(user_with(ANSWERER)).post(
        "/api/function-responses/", answers((question.id, {"approved": True})), format="json"
    )
    assert error_of(response)[:2] == (403, "permission_denied")
    assert snapshot() == before
    erin = client_for(user_with(ANSWERER, username="erin"))
    ok = erin.post(
        "/api/function-responses/", answers((question.id, {"approved": True})), format="json"
    )
    assert ok.status_code == 202
    assert Interrupt.objects.get(pk=question.id).status == "resolved"
