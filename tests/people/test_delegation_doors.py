"""Delegation through the admin and the API: the same rule as the services (who may
delegate whom, who may end), clear refusals that change nothing, and the decision page's
"answering for" banner."""

from datetime import UTC, timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.approvals.conftest import decision_url
from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory, UserFactory, grant_answer
from tests.people.conftest import away, window
from workflows.models import AuditEntry, Delegation

pytestmark = pytest.mark.django_db(transaction=True)
OUT_OF_OFFICE = "/admin/workflows/delegation/out-of-office/"
ADD = "/admin/workflows/delegation/add/"
LIST = "/admin/workflows/delegation/"


def stored():
    return sorted(Delegation.objects.values_list("pk", "ended_at")), AuditEntry.objects.count()


def staff_with(*codenames):
    return grant_answer(UserFactory(is_staff=True), "answer_interrupt", *codenames)


def api_for(user) -> APIClient:
    client = APIClient()
    if not isinstance(user, AnonymousUser):
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def body(delegate="bob", **fields):
    starts_at, ends_at = window()
    return {
        "delegate": delegate,
        "starts_at": starts_at.isoformat(),
        "ends_at": ends_at.isoformat(),
        **fields,
    }


def error_of(response):
    data = response.json()
    assert set(data) >= {"error", "detail", "field"}, data
    return response.status_code, data["error"], data["field"]


# --- API ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "who, status",
    [
        ("self", 201),
        ("other without the permission", 403),
        ("staff with add_delegation", 201),
        ("anonymous", 401),
        ("inactive", 401),
    ],
)
def test_api_who_may_delegate_adas_work(ada, bob, who, status):
    actor = {
        "self": lambda: ada,
        "other without the permission": lambda: ApproverFactory(username="other"),
        "staff with add_delegation": lambda: staff_with("add_delegation"),
        "anonymous": AnonymousUser,
        "inactive": lambda: ApproverFactory(username="gone", is_active=False),
    }[who]()
    before = stored()
    response = api_for(actor).post("/api/delegations/", body(delegator="ada"), format="json")
    assert response.status_code == status, response.content
    if status == 201:
        data = response.json()
        assert (data["delegator"], data["delegate"], data["active"]) == ("ada", "bob", True)
        assert data["created_by"] == actor.get_username()
    else:
        assert stored() == before
        assert error_of(response)[1] in (
            "permission_denied",
            "not_authenticated",
            "authentication_failed",
        )


def test_api_delegates_your_own_work_by_default(ada, bob):
    response = api_for(ada).post("/api/delegations/", body(workflows=[WORKFLOW]), format="json")
    assert response.status_code == 201
    assert Delegation.objects.get().delegator == ada


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"delegate": "nobody"}, "delegate"),
        ({"delegate": "ada"}, "delegate"),
        ({"workflows": ["no_such_flow"]}, "workflows"),
        ({"ends_at": (timezone.now() - timedelta(days=3)).isoformat()}, "ends_at"),
        ({"starts_at": "tomorrow"}, "starts_at"),
        ({"workflows": "all"}, "workflows"),
    ],
    ids=[
        "unknown delegate",
        "self",
        "unknown workflow",
        "ends before starts",
        "bad date",
        "not a list",
    ],
)
def test_api_bad_values_are_400_naming_the_field(ada, bob, fields, field):
    before = stored()
    response = api_for(ada).post("/api/delegations/", {**body(), **fields}, format="json")
    assert error_of(response) == (400, "invalid_request", field)
    assert stored() == before


def test_api_an_overlap_is_400(ada, bob):
    away(ada, bob)
    response = api_for(ada).post("/api/delegations/", body(), format="json")
    status, code, _ = error_of(response)
    assert (status, code) == (400, "invalid_request")
    assert "already stands in for ada" in response.json()["detail"]


@pytest.mark.parametrize(
    "who, status",
    [("delegator", 200), ("delegate", 403), ("other", 403), ("change_delegation", 200)],
)
def test_api_who_may_end(ada, bob, who, status):
    delegation = away(ada, bob)
    actor = {
        "delegator": lambda: ada,
        "delegate": lambda: bob,
        "other": lambda: ApproverFactory(username="other"),
        "change_delegation": lambda: staff_with("change_delegation"),
    }[who]()
    response = api_for(actor).post(f"/api/delegations/{delegation.pk}/end/")
    assert response.status_code == status, response.content
    ended = Delegation.objects.get(pk=delegation.pk).ended_at
    assert (ended is not None) == (status == 200)
    if status == 200:
        assert response.json()["active"] is False


@pytest.mark.parametrize("lookup", ["999999", "abc", "99999999999999999999999"])
def test_api_an_unknown_delegation_is_404(ada, lookup):
    response = api_for(ada).post(f"/api/delegations/{lookup}/end/")
    assert error_of(response)[:2] == (404, "unknown_delegation")


def test_api_lists_what_you_gave_received_or_made_and_all_with_a_permission(ada, bob):
    cy = ApproverFactory(username="cy")
    mine = away(ada, bob)
    theirs = away(cy, ApproverFactory(username="dan"))

    def listed(user):
        return {d["id"] for d in api_for(user).get("/api/delegations/").json()["results"]}

    assert listed(ada) == listed(bob) == {mine.pk}
    assert listed(staff_with("view_delegation")) == {mine.pk, theirs.pk}
    assert api_for(cy).get(f"/api/delegations/{mine.pk}/").status_code == 404


# --- admin ----------------------------------------------------------------------------------


def form(delegate, **fields):
    starts_at, ends_at = window()
    local = lambda moment: timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")  # noqa: E731
    return {
        "_action": "delegate",
        "delegate": delegate.pk,
        "starts_at": local(starts_at),
        "ends_at": local(ends_at),
        **fields,
    }


def test_admin_staff_set_their_own_out_of_office(client, ada, bob):
    client.force_login(ada)
    page = client.get(OUT_OF_OFFICE)
    assert page.status_code == 200 and "Nobody stands in for you" in page.content.decode()
    response = client.post(OUT_OF_OFFICE, form(bob, workflows=[WORKFLOW]))
    assert response.status_code == 302
    delegation = Delegation.objects.get()
    assert (delegation.delegator, delegation.delegate, delegation.workflows) == (
        ada,
        bob,
        [WORKFLOW],
    )
    assert "delegations-given" in client.get(OUT_OF_OFFICE).content.decode()
    client.post(OUT_OF_OFFICE, {"_action": "end", "delegation": delegation.pk})
    assert Delegation.objects.get().ended_at is not None


def test_admin_the_delegate_sees_whom_they_stand_in_for(client, ada, bob):
    away(ada, bob)
    client.force_login(bob)
    html = client.get(OUT_OF_OFFICE).content.decode()
    assert "You stand in for" in html and "Ada" in html


def test_admin_refusals_are_shown_on_the_form_and_store_nothing(client, ada, bob):
    client.force_login(ada)
    away(ada, bob)
    before = stored()
    response = client.post(OUT_OF_OFFICE, form(bob))
    assert response.status_code == 200
    assert "already stands in for ada" in response.content.decode()
    starts_at, _ = window()
    late = form(
        bob, ends_at=timezone.localtime(starts_at - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    )
    assert "ends before it starts" in client.post(OUT_OF_OFFICE, late).content.decode()
    assert stored() == before


def test_admin_one_may_not_end_someone_elses_delegation(client, ada, bob):
    delegation = away(ada, bob)
    client.force_login(bob)
    response = client.post(
        OUT_OF_OFFICE, {"_action": "end", "delegation": delegation.pk}, follow=True
    )
    assert "lacks the permission workflows.change_delegation" in response.content.decode()
    assert Delegation.objects.get().ended_at is None


@pytest.mark.parametrize("given", ["abc", "", "1.5", "12" * 20, "\u0661", None])
def test_admin_ending_a_delegation_by_an_id_no_row_can_have_says_so(client, ada, bob, given):
    delegation = away(ada, bob)
    client.force_login(ada)
    before = stored()
    posted = {"_action": "end"} if given is None else {"_action": "end", "delegation": given}
    response = client.post(OUT_OF_OFFICE, posted, follow=True)
    assert response.status_code == 200
    assert "unknown delegation" in response.content.decode().lower()
    assert stored() == before and Delegation.objects.get(pk=delegation.pk).ended_at is None


def test_admin_the_page_is_for_staff_only(client, bob):
    client.force_login(UserFactory(username="outsider"))
    assert client.get(OUT_OF_OFFICE).status_code == 302  # to the admin's login


def test_admin_the_index_links_the_page(client, ada):
    client.force_login(ada)
    assert OUT_OF_OFFICE in client.get("/admin/").content.decode()


@pytest.mark.parametrize(
    "codenames, status", [((), 403), (("add_delegation",), 302)], ids=["without", "with"]
)
def test_admin_delegating_anyones_work_takes_add_delegation(client, ada, bob, codenames, status):
    staff = staff_with(*codenames)
    client.force_login(staff)
    before = stored()
    response = client.post(ADD, {**form(bob), "delegator": ada.pk})
    assert response.status_code == status
    if status == 302:
        assert Delegation.objects.get().created_by == staff
        assert client.get(LIST).status_code == 200
    else:
        assert stored() == before


def test_admin_end_action_asks_the_rule_for_each(client, ada, bob):
    cy = ApproverFactory(username="cy")
    own = away(ada, bob, actor=None)
    other = away(cy, bob, actor=None)
    viewer = grant_answer(ada, "view_delegation")
    client.force_login(viewer)
    client.post(LIST, {"action": "end_selected", "_selected_action": [own.pk, other.pk]})
    assert Delegation.objects.get(pk=own.pk).ended_at is not None
    assert Delegation.objects.get(pk=other.pk).ended_at is None


# --- the decision page --------------------------------------------------------------------------


def test_the_decision_page_says_whom_a_delegate_answers_for(client, ada, bob):
    delegation = away(ada, bob, end_hours=72)
    interrupt = ask(assignees=["user:ada"])
    client.force_login(bob)
    html = client.get(decision_url(interrupt)).content.decode()
    assert 'id="standing-in"' in html
    until = timezone.localtime(delegation.ends_at)
    assert "answering for" in html and "<strong>Ada</strong>" in html
    assert f"away until {until:%A} {until.day} {until:%B}" in html
    client.post(decision_url(interrupt), {"decision": "approve", "comment": ""})
    assert interrupt.decisions.get().on_behalf_of == ada


def test_no_banner_for_ones_own_question(client, ada, bob):
    away(ada, bob)
    client.force_login(bob)
    html = client.get(decision_url(ask(assignees=["user:ada", "user:bob"]))).content.decode()
    assert 'id="standing-in"' not in html


@pytest.mark.parametrize("field", ["starts_at", "ends_at"])
def test_api_a_utc_offset_postgresql_refuses_is_400_naming_the_field(ada, bob, field):
    before = stored()
    moment = (timezone.now() + timedelta(days=1)).replace(tzinfo=None).isoformat() + "-16:00"
    response = api_for(ada).post("/api/delegations/", {**body(), field: moment}, format="json")
    assert error_of(response) == (400, "invalid_request", field)
    assert stored() == before


def test_api_reads_a_date_without_an_offset_in_the_site_time_zone(ada, bob, settings):
    # services.delegate refuses a naive datetime; the API, like every date it takes, reads
    # the text in TIME_ZONE (docs/people.md, "What is refused").
    starts_at, ends_at = window()
    naive = {
        "starts_at": starts_at.astimezone(UTC).replace(tzinfo=None).isoformat(),
        "ends_at": ends_at.astimezone(UTC).replace(tzinfo=None).isoformat(),
    }
    assert settings.TIME_ZONE == "UTC"
    response = api_for(ada).post("/api/delegations/", {**body(), **naive}, format="json")
    assert response.status_code == 201, response.json()
    stored_delegation = Delegation.objects.get()
    assert stored_delegation.starts_at == starts_at
    assert stored_delegation.ends_at == ends_at
