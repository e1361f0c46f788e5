"""The inbox views (DESIGN 4.3) through the admin and the API: who sees what in each view,
the one order (priority, then due, then age), the counts on the admin index (one query,
capped), a bad view refused, the priority filter and fields, and a constant number of
queries as the inbox grows."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests.approvals.conftest import INBOX
from tests.asking import ask
from tests.people.conftest import set_due
from workflows import services
from workflows.inbox import VIEWS, count_each, waiting_for
from workflows.models import Delegation

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/interrupts/"
EXPECTED = {
    "mine": ["mine"],
    "groups": ["groups"],
    "claimed": ["claimed"],
    "delegated": ["delegated"],
    "overdue": ["overdue"],
    "due_soon": ["due_soon"],
}


def end_delegation() -> None:
    """Only alice's own questions left in her whole inbox (the answer rule may or may not
    count delegated ones among them; the view "delegated" is tested apart)."""
    Delegation.objects.update(ended_at=timezone.now())


def admin_ids(client, **params) -> list[str]:
    response = client.get(INBOX, params)
    assert response.status_code == 200
    return [row.pk for row in response.context["cl"].result_list]


def api_ids(client, **params) -> list[str]:
    response = client.get(API, params)
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.fixture
def api(scene):
    client = APIClient()
    client.force_authenticate(scene.alice)
    return client


@pytest.fixture
def admin(client, scene):
    client.force_login(scene.alice)
    return client


@pytest.mark.parametrize("view", list(VIEWS))
def test_each_view_holds_its_questions_in_the_admin_and_the_api(scene, admin, api, view):
    expected = scene.ids(*EXPECTED[view])
    assert admin_ids(admin, view=view) == expected
    assert api_ids(api, view=view) == expected


def test_a_view_leaves_out_what_is_answered_or_decided_already(scene, admin, api):
    services.decide(scene.mine.pk, {"approved": True}, actor=scene.alice)
    two = ask(message="Two approvals", assignees=["user:alice", "user:bob"], quorum=2)
    services.decide(two.pk, {"approved": True}, actor=scene.alice)  # still pending
    assert admin_ids(admin, view="mine") == [] == api_ids(api, view="mine")


def test_four_eyes_keeps_the_starter_out_of_every_view(scene, admin, api):
    own = ask(user=scene.alice, message="Mine to start", assignees=["user:alice"], four_eyes=True)
    assert own.pk not in admin_ids(admin, view="mine") + api_ids(api, view="mine")


def test_delegated_only_inside_the_window_and_the_workflows(scene, admin, api):
    delegation = Delegation.objects.get()
    delegation.workflows = ["another_workflow"]
    delegation.save()
    assert admin_ids(admin, view="delegated") == [] == api_ids(api, view="delegated")
    delegation.workflows = [scene.delegated.workflow_name]
    delegation.save()
    assert api_ids(api, view="delegated") == scene.ids("delegated")
    services.end_delegation(delegation, actor=None)
    assert api_ids(api, view="delegated") == []
    Delegation.objects.update(
        ended_at=None,
        starts_at=timezone.now() + timedelta(hours=1),
        ends_at=timezone.now() + timedelta(hours=2),
    )
    assert api_ids(api, view="delegated") == []


@pytest.mark.parametrize("ended", ["ended", "delegator may not answer"])
def test_with_no_one_to_stand_in_for_delegated_reads_no_question(scene, ended):
    """Most people have no delegation: their "delegated" view and its count are empty
    without a walk of every pending question (2 s at 1,000,000)."""
    delegation = Delegation.objects.get()
    if ended == "ended":
        services.end_delegation(delegation, actor=None)
    else:
        delegation.delegator.user_permissions.clear()
    alice = type(scene.alice).objects.get(pk=scene.alice.pk)
    with CaptureQueriesContext(connection) as captured:
        delegated = waiting_for(alice, "delegated")
        assert list(delegated) == []
        assert count_each({"delegated": delegated}, 10) == {"delegated": 0}
    assert not [q["sql"] for q in captured if "workflows_interrupt" in q["sql"]]


def test_due_soon_follows_the_setting(scene, api, settings):
    settings.HITL = {"DUE_SOON_SECONDS": 3 * 86400}
    assert api_ids(api, view="due_soon") == scene.ids("due_soon", "later")
    settings.HITL = {"DUE_SOON_SECONDS": 600}
    assert api_ids(api, view="due_soon") == []


def test_order_priority_then_due_then_age(scene, admin, api):
    end_delegation()
    low = ask(message="Low", priority="low")
    urgent_later = ask(message="Urgent, due tomorrow", priority="urgent")
    urgent_soon = ask(message="Urgent, due soon", priority="urgent")
    urgent_undated = ask(message="Urgent, no due date", priority="urgent")
    high = ask(message="High", priority="high")
    set_due(urgent_later, timedelta(days=1))
    set_due(urgent_soon, timedelta(hours=1))
    set_due(low, -timedelta(days=3))  # overdue, but low: after every normal one
    # The normal ones: by due date, then the undated by age.
    normal = scene.ids("overdue", "due_soon", "later", "mine", "groups", "claimed")
    expected = [urgent_soon.pk, urgent_later.pk, urgent_undated.pk, high.pk, *normal, low.pk]
    assert admin_ids(admin) == expected
    assert api_ids(api, status="pending") == expected


def test_the_api_shows_priority_and_due_at_and_filters_by_priority(scene, api):
    urgent = ask(message="Urgent", priority="urgent")
    rows = {row["id"]: row for row in api.get(API).json()["results"]}
    assert rows[urgent.pk]["priority"] == "urgent"
    assert rows[scene.mine.pk]["priority"] == "normal"
    assert rows[scene.mine.pk]["due_at"] is None
    assert rows[scene.overdue.pk]["due_at"] is not None
    assert api_ids(api, priority="urgent") == [urgent.pk]
    detail = api.get(f"{API}{urgent.pk}/").json()
    assert detail["priority"] == "urgent" and "due_at" in detail


@pytest.mark.parametrize(
    ("params", "field"),
    [({"view": "everything"}, "view"), ({"view": ""}, "view"), ({"priority": "asap"}, "priority")],
)
def test_a_bad_view_or_priority_is_a_400_naming_the_choices(scene, api, params, field):
    response = api.get(API, params)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request" and body["field"] == field
    choices = VIEWS if field == "view" else ["urgent", "low"]
    assert all(choice in body["detail"] for choice in choices), body["detail"]


def test_admin_index_counts_each_view_in_one_query(scene, admin):
    with CaptureQueriesContext(connection) as captured:
        page = admin.get("/admin/").content.decode()
    counting = [
        q["sql"] for q in captured if "COUNT(" in q["sql"] and "workflows_interrupt" in q["sql"]
    ]
    assert len(counting) == 1, counting
    for view in VIEWS:
        link = f'href="{INBOX}?view={view}" data-view="{view}">{VIEWS[view]} <span'
        assert link in page, view
        assert f'data-view="{view}">{VIEWS[view]} <span class="hitl-count' in page
    assert 'data-view="overdue">overdue <span class="hitl-count overdue">1</span>' in page
    assert 'data-view="delegated">delegated to me <span class="hitl-count">1</span>' in page
    assert "Pending approvals: " in page


def test_counts_and_pages_stop_at_the_limit(scene, admin, api, settings):
    end_delegation()
    settings.HITL = {"INBOX_COUNT_LIMIT": 3}
    page = admin.get("/admin/").content.decode()
    assert "Pending approvals: 3+" in page
    listing = admin.get(INBOX).content.decode()
    assert "more than 3 pending approvals" in listing
    body = api.get(API, {"status": "pending"}).json()
    assert body["count"] == 4 and body["count_capped"] is True
    assert len(body["results"]) == 6  # the page itself is whole
    settings.HITL = {"INBOX_COUNT_LIMIT": 1000}
    body = api.get(API, {"status": "pending"}).json()
    assert body["count"] == 6 and body["count_capped"] is False


def test_search_reads_the_question_the_workflow_and_the_payload(scene, admin):
    end_delegation()
    paid = ask(message="Pay the invoice", payload={"vendor": "Globex"})
    assert admin_ids(admin, q="globex") == [paid.pk]
    assert admin_ids(admin, q='"pay the"') == [paid.pk]
    assert admin_ids(admin, q="invoice globex") == [paid.pk]
    assert len(admin_ids(admin, q="hitl_test_ask")) == 7  # the workflow's name: all of them
    assert admin_ids(admin, q="globex", view="mine") == []


def test_the_lists_run_a_constant_number_of_queries(scene, admin, api, django_assert_num_queries):
    def queries(client, url, **params) -> int:
        client.get(url, params)  # the user's groups are then cached on the API's user object
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, params).status_code == 200
        return len(captured)

    pages = [
        (admin, INBOX, {}),
        (admin, INBOX, {"view": "delegated"}),
        (api, API, {}),
        (api, API, {"view": "groups"}),
        (admin, "/admin/", {}),
    ]
    before = [queries(client, url, **params) for client, url, params in pages]
    for n in range(12):
        question = ask(message=f"More {n}", assignees=["group:finance"], priority="high")
        services.claim(question.pk, actor=scene.alice)
        set_due(question, timedelta(minutes=n))
    for (client, url, params), count in zip(pages, before, strict=True):
        with django_assert_num_queries(count):
            client.get(url, params)
