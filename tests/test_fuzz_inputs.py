"""Generated input at every entry point that takes any: the services (start, answers,
decisions, reassign, claim, release), every API endpoint's body, URL ids and query
parameters, the admin lists' filters (the monitor's and the approvals inbox's), record
pages and the decision form. Whatever is sent: success, or a refusal that is a named error
(a service's error with its code, a 4xx API answer in the one error format, a graceful admin
page), never a server error, and nothing changed by a refusal.

The values are JSON of every shape (deep, wide, NaN and Infinity, lone surrogates, NUL
characters, huge numbers, long strings) and texts built to break parsers and queries.
Profiles: "ci" (the default: a bounded, reproducible run) and "thorough" (many more
examples, new ones each run): `HYPOTHESIS_PROFILE=thorough pytest tests/test_fuzz_inputs.py`.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any
from urllib.parse import quote

import pytest
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.asking import APPROVAL, ask
from tests.factories import StaffFactory
from workflows import services
from workflows.engine import RequestInput, Workflow, node
from workflows.engine.errors import WorkflowError
from workflows.models import (
    Decision,
    IdempotencyKey,
    Interrupt,
    Invocation,
    NodeRun,
    Session,
    SessionEvent,
    WebhookDelivery,
)
from workflows.registry import UnknownWorkflowError

pytestmark = pytest.mark.django_db(transaction=True)

_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, suppress_health_check=_QUIET
)
settings.register_profile("thorough", max_examples=400, deadline=None, suppress_health_check=_QUIET)
FUZZ = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A refusal the services name: an engine or service error with its code, or the answer rule.
NAMED_ERRORS = (WorkflowError, UnknownWorkflowError, PermissionDenied)

# --- What is sent ----------------------------------------------------------------------------

EDGE_TEXTS = [
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff x",
    "²",
    "٣",
    "9" * 5000,
    "1e20",
    "-1",
    "1.5",
    "NaN",
    "Infinity",
    "null",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "[" * 3000,
    "{" * 50,
    "x" * 300,
    "user:ada",
    "group:\x00",
    "%00",
    "_2F",
]
CHARACTERS = st.one_of(
    st.characters(), st.characters(categories=["Cs"]), st.sampled_from('\x00²٣[{"\\_%')
)
EDGES = st.sampled_from(EDGE_TEXTS)
TEXTS = st.one_of(EDGES, st.text(CHARACTERS, max_size=30))
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, -0.0]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=20,
)


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


DEEP = st.builds(nested, st.integers(0, 3000), SCALARS)
VALUES = st.one_of(JSON, DEEP)


def json_text(value: Any) -> str:
    """`value` as a client would send it (NaN as NaN, lone surrogates escaped); a value too
    deep for Python's encoder as brackets."""
    try:
        return json.dumps(value)
    except (RecursionError, ValueError):
        return "[" * 2000 + "]" * 2000


DEEP_TEXTS = st.integers(0, 3000).map(lambda n: "[" * n + "]" * n)
JSON_TEXTS = st.one_of(VALUES.map(json_text), DEEP_TEXTS, TEXTS)
# An answer: any value, or a JSON text under "result" (parsed when unwrapped).
ANSWERS = st.one_of(VALUES, JSON_TEXTS.map(lambda text: {"result": text}))

QUESTION = "<the question>"  # stands for the id of the question an example asks
IDS = st.one_of(st.just(QUESTION), TEXTS)


def the_ids(value: Any, question_id: str) -> Any:
    return question_id if value == QUESTION else value


SUBMISSION_ITEMS = st.one_of(
    st.fixed_dictionaries(
        {"id": IDS, "response": ANSWERS}, optional={"name": st.one_of(TEXTS, JSON)}
    ),
    JSON,
)
SUBMISSIONS = st.one_of(st.lists(SUBMISSION_ITEMS, max_size=3), JSON)
ASSIGNEES = st.one_of(
    st.lists(
        st.one_of(
            st.sampled_from(["user:ada", "group:finance", "user:nobody"]),
            TEXTS.map(lambda text: f"user:{text}"),
            TEXTS.map(lambda text: f"group:{text}"),
            JSON,
        ),
        max_size=4,
    ),
    VALUES,
)

# --- What it is sent to ----------------------------------------------------------------------


@node(name="echo")
def echo(node_input: Any) -> Any:
    return node_input


@node(name="show")
def show(node_input: Any) -> RequestInput:
    return RequestInput(message="Look at this", payload=node_input)


@pytest.fixture
def fuzz_workflow(register_workflow):
    """Its input becomes a node's output and a question's payload."""
    register_workflow(Workflow(name="fuzz_echo", edges=[("START", echo, show)]))


@pytest.fixture
def root(db):
    return StaffFactory(username="root")


@pytest.fixture
def api(root) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=root).key}")
    return client


@pytest.fixture
def admin_client(root) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(root)
    return client


def a_question(schema_given: bool) -> Any:
    return ask(response_schema=APPROVAL if schema_given else None)


TABLES = [
    Session,
    Invocation,
    NodeRun,
    SessionEvent,
    Interrupt,
    Decision,
    IdempotencyKey,
    WebhookDelivery,
]


def rows(question: Any = None) -> tuple[list[int], str]:
    """What a refusal must leave as it was: how many rows each table has, and every row of
    the example's own question and its invocation (the rows of earlier examples are
    counted, not compared: each example stays as quick as the first)."""
    counts = [table.objects.count() for table in TABLES]
    if question is None:
        return counts, ""
    invocation = question.invocation_id
    mine = [
        *Invocation.objects.filter(pk=invocation),
        *NodeRun.objects.filter(invocation=invocation),
        *SessionEvent.objects.filter(invocation=invocation),
        *Interrupt.objects.filter(invocation=invocation),
        *Decision.objects.filter(interrupt__invocation=invocation),
    ]
    return counts, serializers.serialize("json", mine)


def call_service(call: Any, question: Any = None) -> None:
    """Run one service call: it succeeds, or raises a named error and changes nothing."""
    before = rows(question)
    try:
        call()
    except NAMED_ERRORS:
        assert rows(question) == before, "a refused call changed something"


def check_answer(response: Any, before: Any, question: Any) -> None:
    """An HTTP answer: never a server error; a refusal changed nothing, and an API refusal
    names its error in the one format."""
    assert response.status_code < 500, response.content[:500]
    if response.status_code >= 400:
        assert rows(question) == before, f"a {response.status_code} changed something"
        if response.get("Content-Type", "").startswith("application/json"):
            body = response.json()
            assert body["error"] and body["detail"], body


def path_part(text: str) -> str:
    """`text` as one URL path segment, bytes a lone surrogate cannot encode included."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def query_string(params: dict[str, str]) -> str:
    return "&".join(f"{path_part(key)}={path_part(value)}" for key, value in params.items())


# --- The services ----------------------------------------------------------------------------


@FUZZ
@given(node_input=VALUES, workflow=st.sampled_from(["fuzz_echo", "hitl_test_ask", "\x00"]))
def test_start(fuzz_workflow, root, node_input, workflow):
    call_service(lambda: services.start(workflow, node_input, user=root))


@FUZZ
@given(responses=SUBMISSIONS, as_person=st.booleans(), schema_given=st.booleans())
def test_submit_function_responses(root, responses, as_person, schema_given):
    question = a_question(schema_given)
    if isinstance(responses, list):
        responses = [
            {**item, "id": the_ids(item["id"], question.pk)}
            if isinstance(item, dict) and "id" in item
            else item
            for item in responses
        ]
    actor = root if as_person else None
    call_service(lambda: services.submit_function_responses(responses, actor=actor), question)


@FUZZ
@given(
    interrupt_id=IDS,
    response=ANSWERS,
    comment=st.one_of(TEXTS, JSON),
    schema_given=st.booleans(),
)
def test_decide(root, interrupt_id, response, comment, schema_given):
    question = a_question(schema_given)
    interrupt_id = the_ids(interrupt_id, question.pk)
    call_service(
        lambda: services.decide(interrupt_id, response, actor=root, comment=comment), question
    )


@FUZZ
@given(interrupt_id=IDS, assignees=ASSIGNEES)
def test_reassign(root, interrupt_id, assignees):
    question = a_question(True)
    interrupt_id = the_ids(interrupt_id, question.pk)
    call_service(lambda: services.reassign(interrupt_id, assignees, actor=root), question)


@FUZZ
@given(interrupt_id=IDS, operation=st.sampled_from([services.claim, services.release]))
def test_claim_and_release(root, interrupt_id, operation):
    question = a_question(True)
    interrupt_id = the_ids(interrupt_id, question.pk)
    call_service(lambda: operation(interrupt_id, actor=root), question)


@FUZZ
@given(invocation_id=IDS, operation=st.sampled_from([services.cancel, services.retry]))
def test_cancel_and_retry(root, invocation_id, operation):
    question = a_question(True)
    invocation_id = the_ids(invocation_id, str(question.invocation_id))
    call_service(lambda: operation(invocation_id, actor=root), question)


# --- The API ---------------------------------------------------------------------------------

BODIES = st.one_of(
    st.builds(
        lambda workflow, value: f'{{"workflow": {workflow}, "input": {value}}}',
        st.one_of(st.just('"fuzz_echo"'), JSON_TEXTS),
        JSON_TEXTS,
    ).map(lambda body: ("/api/invocations/", body)),
    st.builds(
        lambda interrupt_id, name, answer: (
            f'{{"function_responses": [{{"id": {interrupt_id}, "name": {name}, '
            f'"response": {answer}}}]}}'
        ),
        st.one_of(st.just(json.dumps(QUESTION)), JSON_TEXTS),
        st.one_of(st.just('"show"'), JSON_TEXTS),
        st.one_of(ANSWERS.map(json_text), JSON_TEXTS),
    ).map(lambda body: ("/api/function-responses/", body)),
    st.builds(
        lambda answer, comment: f'{{"response": {answer}, "comment": {comment}}}',
        st.one_of(ANSWERS.map(json_text), JSON_TEXTS),
        st.one_of(st.just('""'), JSON_TEXTS),
    ).map(lambda body: (f"/api/interrupts/{QUESTION}/decisions/", body)),
    st.tuples(
        st.sampled_from(
            [
                "/api/invocations/",
                "/api/function-responses/",
                f"/api/interrupts/{QUESTION}/decisions/",
                f"/api/interrupts/{QUESTION}/claim/",
                f"/api/interrupts/{QUESTION}/release/",
                "/api/token/",
            ]
        ),
        JSON_TEXTS,
    ),
)


@FUZZ
@given(target=BODIES, idempotency_key=st.one_of(st.none(), TEXTS), schema_given=st.booleans())
def test_api_bodies(fuzz_workflow, api, target, idempotency_key, schema_given):
    question = a_question(schema_given)
    url, body = target
    url = url.replace(QUESTION, path_part(question.pk))
    body = body.replace(json.dumps(QUESTION), json.dumps(question.pk))
    headers = {} if idempotency_key is None else {"HTTP_IDEMPOTENCY_KEY": idempotency_key}
    before = rows(question)
    data = body.encode("utf-8", "surrogatepass")  # bytes no UTF-8 decoder accepts included
    response = api.generic("POST", url, data, content_type="application/json", **headers)
    check_answer(response, before, question)


ACTIONS = [
    ("GET", "interrupts", ""),
    ("POST", "interrupts", "decisions/"),
    ("POST", "interrupts", "claim/"),
    ("POST", "interrupts", "release/"),
    ("GET", "invocations", ""),
    ("GET", "invocations", "events/"),
    ("POST", "invocations", "cancel/"),
    ("POST", "invocations", "retry/"),
    ("GET", "workflows", ""),
]
URL_IDS = TEXTS.filter(lambda text: text and "/" not in text)


@FUZZ
@given(object_id=URL_IDS, action=st.sampled_from(ACTIONS))
def test_api_ids_in_urls(api, object_id, action):
    question = a_question(True)
    method, kind, suffix = action
    before = rows(question)
    response = api.generic(
        method,
        f"/api/{kind}/{path_part(object_id)}/{suffix}",
        "{}",
        content_type="application/json",
    )
    check_answer(response, before, question)


def cursor(offset: str, reverse: str, position: str) -> str:
    return base64.b64encode(
        f"o={offset}&r={reverse}&p={position}".encode("utf-8", "surrogatepass")
    ).decode()


QUERY_VALUES = st.one_of(
    EDGES,
    TEXTS,
    st.datetimes(timezones=st.timezones()).map(lambda moment: moment.isoformat()),
    st.builds(cursor, TEXTS, TEXTS, TEXTS),
)


def parameters(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    """Any of these query parameters (each present or not), and a few others."""
    known = st.fixed_dictionaries({}, optional=dict.fromkeys(names, QUERY_VALUES))
    others = st.dictionaries(TEXTS, QUERY_VALUES, max_size=2)
    return st.builds(lambda given, extra: {**extra, **given}, known, others)


API_PARAMETERS = parameters(
    [
        "page",
        "page_size",
        "status",
        "workflow",
        "started_by",
        "claimed_by",
        "invocation",
        "created_after",
        "created_before",
        "cursor",
        "format",
    ]
)
API_LISTS = ["/api/invocations/", "/api/interrupts/", "/api/workflows/", "events"]


@FUZZ
@given(url=st.sampled_from(API_LISTS), params=API_PARAMETERS)
def test_api_query_parameters(api, root, url, params):
    question = a_question(True)
    if url == "events":
        url = f"/api/invocations/{question.invocation_id}/events/"
    before = rows(question)
    check_answer(api.get(f"{url}?{query_string(params)}"), before, question)


# --- The admin pages -------------------------------------------------------------------------

ADMIN_LISTS = [
    "/admin/workflows/invocation/",
    "/admin/workflows/interrupt/",
    "/admin/workflows/decision/",
    "/admin/approvals/pendingapproval/",
]
ADMIN_PARAMETERS = parameters(
    [
        "status",
        "workflow_name",
        "workflow",
        "assigned",
        "claimed",
        "overdue",
        "q",
        "o",
        "p",
        "e",
        "all",
        "_facets",
        "created_at__year",
        "created_at__month",
        "created_at__day",
        "status__exact",
        "workflow_name__exact",
    ]
)


@FUZZ
@given(url=st.sampled_from(ADMIN_LISTS), params=ADMIN_PARAMETERS)
def test_admin_list_filters(admin_client, url, params):
    question = a_question(True)
    before = rows(question)
    check_answer(admin_client.get(f"{url}?{query_string(params)}"), before, question)


@FUZZ
@given(
    object_id=URL_IDS,
    page=st.sampled_from(
        [
            "/admin/workflows/interrupt/{}/change/",
            "/admin/workflows/interrupt/{}/history/",
            "/admin/workflows/invocation/{}/change/",
            "/admin/workflows/invocation/{}/cancel/",
            "/admin/approvals/pendingapproval/{}/change/",
        ]
    ),
)
def test_admin_record_pages(admin_client, object_id, page):
    question = a_question(True)
    before = rows(question)
    check_answer(admin_client.get(page.format(path_part(object_id))), before, question)


@FUZZ
@given(
    form=st.fixed_dictionaries(
        {},
        optional={
            "response": JSON_TEXTS,
            "comment": TEXTS,
            "decision": st.one_of(st.sampled_from(["approve", "reject"]), TEXTS),
            "_action": st.one_of(st.sampled_from(["claim", "release", "reassign"]), TEXTS),
            "assignees": st.one_of(TEXTS, st.lists(TEXTS, max_size=3).map(", ".join)),
            "approved": st.one_of(st.sampled_from(["on", "true"]), TEXTS),
        },
    ),
    schema_given=st.booleans(),
)
def test_admin_decision_form(admin_client, form, schema_given):
    question = a_question(schema_given)
    form = {key: value.encode("utf-8", "surrogatepass") for key, value in form.items()}
    url = f"/admin/approvals/pendingapproval/{path_part(question.pk)}/change/"
    before = rows(question)
    response = admin_client.post(url, form)
    assert response.status_code < 500, response.content[:500]
    if response.status_code == 200 and b"errorlist" in response.content:
        assert rows(question) == before, "a refused decision changed something"
