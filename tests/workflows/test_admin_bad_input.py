"""Query strings and URLs the admin pages are given never fail them: a lookup the
database cannot answer (a NUL character, which PostgreSQL refuses even to compare; a date
the date hierarchy cannot bound) gets Django's invalid-lookup page (a redirect to
"?e=1"), an id no row can have gets the page for a missing object, and a decision typed
deeper than the parser goes is a form error."""

import re
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.db.models import DateTimeField
from django.test import Client
from django.urls import reverse

from approvals.models import Passkey
from tests.approvals.conftest import INBOX, decision_url
from tests.asking import ask
from tests.factories import StaffFactory

pytestmark = pytest.mark.django_db(transaction=True)

MONITOR = "/admin/workflows/invocation/"
INTERRUPTS = "/admin/workflows/interrupt/"
DECISIONS = "/admin/workflows/decision/"


@pytest.fixture
def admin_client():
    client = Client(raise_request_exception=False)
    client.force_login(StaffFactory(username="root"))
    ask()  # something to list
    return client


def invalid_lookup(response, url: str) -> bool:
    return response.status_code == 302 and response["Location"] == f"{url}?e=1"


@pytest.mark.parametrize("url", [MONITOR, DECISIONS])
@pytest.mark.parametrize(
    "query",
    [
        "created_at__year=9999",
        "created_at__year=9999&created_at__month=12",
        "created_at__year=9999&created_at__month=12&created_at__day=31",
        "created_at__year=99999",
        "created_at__year=%C2%B2",
    ],
)
def test_a_date_the_hierarchy_cannot_bound_is_an_invalid_lookup(admin_client, url, query):
    assert invalid_lookup(admin_client.get(f"{url}?{query}"), url)
    assert admin_client.get(f"{url}?created_at__year=9998").status_code == 200


def changelist_date_fields() -> list[tuple[str, str]]:
    """(changelist URL, date-time field) of every list of this project's admin (but the
    passkeys' page, which is one of its own and reads no query string)."""
    return [
        (reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"), f.name)
        for model in admin.site._registry
        if model._meta.app_label in ("workflows", "approvals") and model is not Passkey
        for f in model._meta.get_fields()
        if isinstance(f, DateTimeField)
    ]


REFUSED_DATE_TIMES = [
    ("gte", "2026-01-01T00:00:00+16:00"),
    ("lt", "2026-01-01T00:00:00-23:59"),
    ("", "2026-01-01 00:00:00+16:30"),
    ("in", "2026-01-01T00:00:00Z,2026-01-02T00:00:00+20:00"),
    ("lte", "not a date"),
]


@pytest.mark.parametrize(
    ("url", "field", "lookup", "value"),
    [
        (url, field, *REFUSED_DATE_TIMES[index % len(REFUSED_DATE_TIMES)])
        for index, (url, field) in enumerate(changelist_date_fields())
    ],
)
def test_a_date_time_postgresql_refuses_is_an_invalid_lookup_that_says_why(
    admin_client, url, field, lookup, value
):
    query = f"{field}__{lookup}" if lookup else field
    response = admin_client.get(f"{url}?{query}={quote(value)}")
    assert invalid_lookup(response, url)
    shown = admin_client.get(response["Location"]).content.decode().lower()
    assert f"{query}: " in shown and ("utc offset" in shown or "not an iso 8601" in shown)
    assert (
        admin_client.get(f"{url}?{field}__gte={quote('2026-01-01T00:00:00+14:00')}").status_code
        == 200
    )


@pytest.mark.parametrize(
    ("url", "query"),
    [
        (MONITOR, "status=%00"),
        (MONITOR, "workflow_name=a%00b"),
        (MONITOR, "q=%00"),
        (INTERRUPTS, "status=%00"),
        (INTERRUPTS, "q=x%00"),
        (INBOX, "workflow=%00"),
        (INBOX, "q=%00"),
        (INBOX, "wor%00kflow=x"),
    ],
)
def test_a_nul_in_the_query_string_is_an_invalid_lookup(admin_client, url, query):
    assert invalid_lookup(admin_client.get(f"{url}?{query}"), url)


@pytest.mark.parametrize("object_id", ["%00", "a%00b", "x" * 256])
def test_a_record_page_for_an_id_no_row_can_have_is_a_missing_object(admin_client, object_id):
    response = admin_client.get(f"{INTERRUPTS}{object_id}/change/")
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert admin_client.get(f"{MONITOR}{object_id}/change/").status_code == 302
    assert admin_client.get(f"{INBOX}{object_id}/change/").status_code == 404


def test_a_decision_typed_deeper_than_the_parser_goes_is_a_form_error(admin_client):
    question = ask(response_schema=None)
    for depth, message in [(100_000, "nested too deeply"), (100, "nested more than 64")]:
        text = "[" * depth + "]" * depth
        response = admin_client.post(decision_url(question), {"response": text})
        assert response.status_code == 200
        errors = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode())
        assert any(message in error for error in errors), errors
    question.refresh_from_db()
    assert question.status == "pending"
