"""Bad input through the API: every refusal a 4xx in the one error format naming what is
wrong, before anything is stored or a query is sent that the database would fail on; a
date and time outside what the database can compare still lists what it means."""

import os
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.asking import ask

from .conftest import error_of, pending, snapshot, start

pytestmark = pytest.mark.django_db(transaction=True)


def deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def post_json(api, url: str, body: str, **headers):
    return api.generic("POST", url, body, content_type="application/json", **headers)


@pytest.mark.parametrize("url", ["/api/invocations/", "/api/interrupts/", "/api/workflows/"])
@pytest.mark.parametrize("page_size", ["²", "٣", "9" * 5000, "1" + "0" * 20, "-1", "0"])
def test_a_page_size_that_is_not_a_small_ascii_number_is_a_400(api, url, page_size):
    response = api.get(f"{url}?page_size={quote(page_size)}")
    assert error_of(response) == (400, "invalid_request", "page_size")


@pytest.mark.parametrize(
    ("url", "parameter"),
    [("/api/invocations/", "started_by"), ("/api/interrupts/", "claimed_by")],
)
@pytest.mark.parametrize("value", ["1e20", "99999999999999999999", "1.5", "²"])
def test_a_person_no_id_column_holds_is_read_as_a_username(api, url, parameter, value):
    """Not an id a 64-bit column holds: a username (nobody's here), never a query the
    database fails on."""
    response = api.get(f"{url}?{parameter}={quote(value)}")
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/invocations/", "started_by"),
        ("/api/interrupts/", "claimed_by"),
        ("/api/delegations/", "delegate"),
    ],
)
def test_a_person_longer_than_any_username_is_a_400(api, url, parameter):
    response = api.get(f"{url}?{parameter}={'a' * 151}")
    assert error_of(response) == (400, "invalid_request", parameter)


@pytest.mark.parametrize("url", ["/api/invocations/", "/api/interrupts/"])
def test_dates_whose_utc_time_no_database_holds_list_what_they_mean(api, operator, url):
    start(user=operator)
    everything = len(api.get(url).json()["results"])
    assert everything == 1
    earliest, latest = "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"

    def count(query: str) -> int:
        response = api.get(f"{url}?{query}")
        assert response.status_code == 200, response.content
        return len(response.json()["results"])

    assert count(f"created_after={quote(earliest)}") == everything
    assert count(f"created_before={quote(latest)}") == everything
    assert count(f"created_after={quote(latest)}") == 0
    assert count(f"created_before={quote(earliest)}") == 0


DATES = settings(
    max_examples=int(os.environ.get("HYPOTHESIS_DATE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LISTS = ["/api/invocations/", "/api/interrupts/"]


@st.composite
def typed_datetimes(draw) -> tuple[str, datetime | None]:
    """An ISO 8601 date and time as a client may type it, with any UTC offset Python reads
    (up to ±23:59) or none; and the instant it means (None past ±15:59)."""
    local = draw(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
    minutes = draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1) | st.sampled_from([0, 960, -960]))
    offset = timedelta(minutes=minutes)
    sign, (hours, rest) = "-" if minutes < 0 else "+", divmod(abs(minutes), 60)
    zone = draw(st.sampled_from(["", f"{sign}{hours:02d}:{rest:02d}", "Z" if not minutes else ""]))
    sep = draw(st.sampled_from(["T", " "]))
    text = local.isoformat(sep, draw(st.sampled_from(["minutes", "seconds", "microseconds"])))
    if abs(offset) >= timedelta(hours=16) and zone:
        return text + zone, None
    aware = local.replace(tzinfo=timezone(offset if zone else timedelta()))
    try:
        return text + zone, aware.astimezone(UTC)
    except OverflowError:  # before the year 1 or after 9999 in UTC: the ends
        return text + zone, datetime.min.replace(tzinfo=UTC) if local.year == 1 else (
            datetime.max.replace(tzinfo=UTC)
        )


@pytest.fixture
def one_invocation(operator):
    return start(user=operator)


@DATES
@given(typed=typed_datetimes(), url=st.sampled_from(LISTS))
@example(typed=("2026-01-01T00:00:00+16:00", None), url=LISTS[0])
@example(typed=("2026-01-01T00:00:00-23:59", None), url=LISTS[1])
def test_a_date_filter_lists_what_it_means_or_is_a_400_naming_it(api, one_invocation, typed, url):
    text, instant = typed
    created = one_invocation.created_at
    for parameter, selected in (
        ("created_after", created.__ge__),
        ("created_before", created.__le__),
    ):
        response = api.get(f"{url}?{parameter}={quote(text)}")
        if instant is None:
            assert error_of(response) == (400, "invalid_request", parameter), text
            assert "UTC offset" in response.json()["detail"]
        else:
            assert response.status_code == 200, (text, response.content)
            assert len(response.json()["results"]) == int(selected(instant)), text


@DATES
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=40))
@example(text="2026-01-01T00:00:00+16:00 100%")
def test_any_text_as_a_date_filter_is_a_list_or_a_400_naming_it(api, one_invocation, text):
    for url in LISTS:
        response = api.get(f"{url}?created_after={quote(text)}")
        if response.status_code != 200:
            assert error_of(response) == (400, "invalid_request", "created_after"), text


@pytest.mark.parametrize("cursor", ["cD1hYmM=", "cD05OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ=="])
def test_a_cursor_whose_position_is_not_an_event_id_is_invalid(api, operator, cursor):
    invocation = start(user=operator)
    response = api.get(f"/api/invocations/{invocation.pk}/events/?cursor={cursor}")
    assert error_of(response) == (404, "not_found", None)


@pytest.mark.parametrize("interrupt_id", ["%00", "a%00b", "x" * 256])
@pytest.mark.parametrize(
    ("method", "action"),
    [("GET", ""), ("POST", "decisions/"), ("POST", "claim/"), ("POST", "release/")],
)
def test_an_interrupt_id_no_interrupt_can_have_is_404(api, operator, interrupt_id, method, action):
    start(user=operator)
    before = snapshot()
    body = '{"response": {"approved": true}}' if action == "decisions/" else ""
    response = api.generic(
        method, f"/api/interrupts/{interrupt_id}/{action}", body, content_type="application/json"
    )
    assert error_of(response)[:2] == (404, "unknown_interrupt")
    assert snapshot() == before


def test_an_input_nested_deeper_than_the_limit_is_a_400_naming_input(api):
    before = snapshot()
    response = post_json(
        api, "/api/invocations/", f'{{"workflow": "api_approval", "input": {deep_text(200)}}}'
    )
    assert error_of(response) == (400, "invalid_input", "input")
    assert "nested more than 64 levels deep" in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize(
    "answer", [deep_text(600), f'{{"result": "{deep_text(5000)}"}}'], ids=["value", "json-text"]
)
def test_a_deep_answer_is_a_400_naming_its_place(api, answer):
    question = ask(response_schema=None)
    before = snapshot()
    response = post_json(
        api,
        "/api/function-responses/",
        f'{{"function_responses": [{{"id": "{question.pk}", "response": {answer}}}]}}',
    )
    assert error_of(response) == (400, "invalid_response", "function_responses[0].response")
    assert snapshot() == before


@pytest.mark.parametrize(
    "answer",
    [
        deep_text(600),
        f'{{"result": "{deep_text(5000)}"}}',
        '{"result": "NaN"}',
        '{"result": "\\"\\\\u0000\\""}',
        '{"result": "\\"\\\\ud800\\""}',
        '{"result": "null"}',
    ],
    ids=["deep", "deep-json-text", "nan", "nul", "surrogate", "null"],
)
def test_a_decision_the_database_cannot_keep_is_a_400_naming_response(api, answer):
    question = ask(response_schema=None)
    before = snapshot()
    response = post_json(
        api, f"/api/interrupts/{question.pk}/decisions/", f'{{"response": {answer}}}'
    )
    assert error_of(response) == (400, "invalid_response", "response")
    assert snapshot() == before


def test_a_null_decision_is_a_400_naming_response(api):
    question = ask(response_schema=None)
    before = snapshot()
    response = post_json(api, f"/api/interrupts/{question.pk}/decisions/", '{"response": null}')
    assert error_of(response)[::2] == (400, "response")
    assert snapshot() == before


@pytest.mark.parametrize("key", ["a\x00b", "\udc80"], ids=["nul", "surrogate"])
def test_an_idempotency_key_no_database_can_keep_is_a_400(api, key):
    before = snapshot()
    response = api.post(
        "/api/invocations/",
        {"workflow": "api_approval", "input": {}},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )
    assert error_of(response) == (400, "invalid_request", "Idempotency-Key")
    assert snapshot() == before


def test_the_answer_still_goes_through_after_refusals(api, operator):
    invocation = start(user=operator)
    (question,) = pending(invocation)
    post_json(api, f"/api/interrupts/{question.pk}/decisions/", '{"response": {"result": "NaN"}}')
    response = api.post(
        f"/api/interrupts/{question.pk}/decisions/",
        {"response": {"result": '{"approved": true}'}},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["response"] == {"approved": True}
