"""One vocabulary across the API: every person by id and by username (`<person>_id`,
`<person>_username`), filters that take either, errors as DRF's lists, boolean filters that
refuse what is not a boolean, and a question one may not see a 404 whatever one asks of it."""

from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone

from tests.gates.gated import REFUND
from workflows import services
from workflows.services import grants

from .conftest import error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERER = "workflows.answer_interrupt"
APPROVE = {"response": {"approved": True}}


def delegation(delegator, delegate, **fields):
    now = timezone.now()
    return services.delegate(
        delegator,
        delegate,
        fields.pop("starts_at", now - timedelta(hours=1)),
        fields.pop("ends_at", now + timedelta(days=1)),
        actor=delegator,
        **fields,
    )


def person(body, name, user):
    """`body` names `user` as `name` both ways."""
    return (body[f"{name}_id"], body[f"{name}_username"]) == (user.pk, user.username)


def test_a_delegate_s_decision_names_both_people_both_ways(client_for):
    ada = user_with(ANSWERER)
    bob = user_with(ANSWERER)
    delegation(ada, bob)
    question = pending(start(node_input={"assignees": [f"user:{ada.username}"]}))[0]
    response = client_for(bob).post(
        f"/api/interrupts/{question.id}/decisions/", APPROVE, format="json"
    )
    assert response.status_code == 202, response.json()
    decision = response.json()
    assert person(decision, "actor", bob) and person(decision, "on_behalf_of", ada)
    assert decision["actor"] == bob.pk  # the field clients already read stays


def test_own_decision_has_no_one_on_whose_behalf(api, operator):
    question = pending(start(user=operator))[0]
    decision = api.post(f"/api/interrupts/{question.id}/decisions/", APPROVE, format="json").json()
    assert person(decision, "actor", operator)
    assert (decision["on_behalf_of_id"], decision["on_behalf_of_username"]) == (None, None)


def test_interrupts_and_invocations_name_people_both_ways(api, operator):
    invocation = start(user=operator)
    question = pending(invocation)[0]
    claimed = api.post(f"/api/interrupts/{question.id}/claim/").json()
    assert person(claimed, "claimed_by", operator) and claimed["claimed_by"] == operator.pk
    (row,) = api.get("/api/interrupts/").json()["results"]
    assert person(row, "claimed_by", operator)
    assert row["resolved_by_id"] is None and row["resolved_by_username"] is None
    listed = api.get("/api/invocations/").json()["results"][0]
    assert person(listed, "started_by", operator) and listed["started_by"] == operator.pk
    detail = api.get(f"/api/invocations/{invocation.pk}/").json()
    assert person(detail["open_interrupts"][0], "claimed_by", operator)


def test_delegations_and_grants_name_people_both_ways(client_for):
    ada, bob = user_with(ANSWERER), user_with(ANSWERER)
    delegation(ada, bob)
    (row,) = client_for(ada).get("/api/delegations/").json()["results"]
    assert person(row, "delegator", ada) and person(row, "delegate", bob)
    assert person(row, "created_by", ada) and row["delegator"] == ada.username
    boss = user_with("workflows.add_grant")
    grants.create_grant(REFUND, "refund", "always", actor=boss)
    (grant,) = client_for(boss).get("/api/grants/").json()["results"]
    assert person(grant, "granted_by", boss) and grant["granted_by"] == boss.username
    assert (grant["revoked_by_id"], grant["revoked_by_username"]) == (None, None)


def test_person_filters_take_an_id_or_a_username(client_for):
    staff = user_with("workflows.add_invocation", "workflows.view_invocation", ANSWERER)
    other = user_with("workflows.add_invocation", ANSWERER)
    mine, theirs = start(user=staff), start(user=other)
    client = client_for(staff)
    client.post(f"/api/interrupts/{pending(mine)[0].id}/claim/")

    def ids(url):
        response = client.get(url)
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    for who, invocation in [(staff, mine), (other, theirs)]:
        for named in (who.pk, quote(who.username)):
            assert ids(f"/api/invocations/?started_by={named}") == {str(invocation.pk)}
    for named in (staff.pk, quote(staff.username)):
        assert ids(f"/api/interrupts/?claimed_by={named}") == {pending(mine)[0].id}
    assert ids("/api/interrupts/?claimed_by=nobody") == set()


def test_digits_name_the_user_with_that_id_and_the_user_with_that_username(client_for):
    staff = user_with("workflows.add_invocation", "workflows.view_invocation")
    digits = user_with("workflows.add_invocation", username=str(staff.pk))
    by_id, by_name = start(user=staff), start(user=digits)
    listed = client_for(staff).get(f"/api/invocations/?started_by={staff.pk}").json()
    assert {row["id"] for row in listed["results"]} == {str(by_id.pk), str(by_name.pk)}


def test_delegations_filter_by_people_activity_and_workflow(client_for):
    staff = user_with("workflows.view_delegation")
    ada, bob, cy = user_with(ANSWERER), user_with(ANSWERER), user_with(ANSWERER)
    now = timezone.now()
    current = delegation(ada, bob, workflows=["api_approval"])
    later = delegation(ada, cy, starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=3))
    everywhere = delegation(cy, bob)
    client = client_for(staff)

    def ids(query):
        response = client.get(f"/api/delegations/?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    assert ids(f"delegator={ada.username}") == ids(f"delegator={ada.pk}") == {current.pk, later.pk}
    assert ids(f"delegate={bob.username}") == {current.pk, everywhere.pk}
    assert ids("active=true") == {current.pk, everywhere.pk}
    assert ids("active=false") == {later.pk}
    assert ids("workflow=api_pair") == {later.pk, everywhere.pk}
    assert ids("workflow=api_approval") == {current.pk, later.pk, everywhere.pk}


@pytest.mark.parametrize("url", ["/api/grants/?live=maybe", "/api/delegations/?active=maybe"])
def test_a_boolean_filter_that_is_not_a_boolean_is_a_400(api, url):
    parameter = url.split("?")[1].split("=")[0]
    assert error_of(api.get(url)) == (400, "invalid_request", parameter)


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/interrupts/?view=nobody", "view"),
        ("/api/interrupts/?page_size=0", "page_size"),
        ("/api/invocations/?status=SLEEPING", "status"),
    ],
)
def test_errors_are_lists_by_field_as_drf_reports_them(api, url, field):
    body = api.get(url).json()
    assert body["field"] == field
    assert isinstance(body["errors"][field], list) and body["errors"][field]


def test_a_question_one_may_not_see_is_a_404_for_every_action(client_for):
    question = pending(start(node_input={"assignees": ["user:dave"]}))[0]
    stranger = client_for(user_with(ANSWERER))
    before = snapshot()
    assert error_of(stranger.get(f"/api/interrupts/{question.id}/"))[0] == 404
    for action, body in [
        ("claim", None),
        ("release", None),
        ("decisions", APPROVE),
        ("challenge", APPROVE),
    ]:
        response = stranger.post(f"/api/interrupts/{question.id}/{action}/", body, format="json")
        assert error_of(response)[:2] == (404, "unknown_interrupt"), action
    assert snapshot() == before


def test_a_question_one_sees_but_may_not_act_on_is_a_403(client_for):
    claimer, colleague = user_with(ANSWERER), user_with(ANSWERER)
    question = pending(start())[0]
    assert client_for(claimer).post(f"/api/interrupts/{question.id}/claim/").status_code == 200
    before = snapshot()
    refused = client_for(colleague).post(f"/api/interrupts/{question.id}/release/")
    assert error_of(refused)[:2] == (403, "permission_denied")
    assert snapshot() == before
    supervisor = client_for(user_with("workflows.reassign_interrupt"))
    assert supervisor.post(f"/api/interrupts/{question.id}/release/").status_code == 200
