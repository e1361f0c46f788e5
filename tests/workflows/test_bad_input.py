"""Bad input at the services: each refusal a named error naming the field, raised before
anything is stored or looked up, on SQLite and PostgreSQL alike.

The nesting limit (HITL["MAX_VALUE_DEPTH"]) where values enter: start's input, answers,
decisions, and the values nodes produce; decisions store the answer they validated (a
`{"result": "<JSON text>"}` is checked once parsed); ids, names, comments and assignees
that a database cannot keep or compare (PostgreSQL refuses a NUL character even in a
lookup) are refused before any query."""

import pytest
from django.core import serializers
from django.test import override_settings

from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory
from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.errors import (
    InputValidationError,
    InvocationNotFoundError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Interrupt, Invocation, NodeRun, Session, SessionEvent

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT_DEPTH = 64


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def snapshot() -> str:
    rows = [
        *Session.objects.all(),
        *Invocation.objects.all(),
        *NodeRun.objects.all(),
        *SessionEvent.objects.all(),
        *Interrupt.objects.all(),
        *Decision.objects.all(),
    ]
    return serializers.serialize("json", rows)


def refused(error_class, call, *args, **kwargs):
    """Call `call`, expecting `error_class`; nothing may have changed. Returns the error."""
    before = snapshot()
    with pytest.raises(error_class) as raised:
        call(*args, **kwargs)
    assert snapshot() == before
    return raised.value


@pytest.fixture
def approver():
    return ApproverFactory(username="ada")


# --- The nesting limit ------------------------------------------------------------------------


def test_an_input_nested_deeper_than_the_limit_is_refused_naming_input():
    error = refused(InputValidationError, services.start, WORKFLOW, nested(200))
    assert error.field == "input"
    assert f"nested more than {DEFAULT_DEPTH} levels deep" in str(error)


@override_settings(HITL={"MAX_VALUE_DEPTH": 3})
def test_the_limit_is_the_setting():
    refused(InputValidationError, services.start, WORKFLOW, nested(4))
    invocation = services.start(WORKFLOW, {"request": {"payload": nested(1)}})
    assert Interrupt.objects.filter(invocation=invocation).exists()


@pytest.mark.parametrize(
    "response",
    [nested(600), {"result": deep_text(600)}, {"result": deep_text(100_000)}],
    ids=["value", "json-text", "json-text-past-the-parser"],
)
def test_a_deep_answer_is_refused_naming_its_place(response):
    question = ask(response_schema=None)
    error = refused(
        ResponseValidationError,
        services.submit_function_responses,
        [{"id": question.pk, "response": response}],
    )
    assert error.field == "function_responses[0].response"
    assert "nested" in str(error)


@pytest.mark.parametrize(
    "response",
    [nested(600), {"result": deep_text(600)}, {"result": deep_text(100_000)}],
    ids=["value", "json-text", "json-text-past-the-parser"],
)
def test_a_deep_decision_is_refused_naming_response(approver, response):
    question = ask(response_schema=None)
    error = refused(ResponseValidationError, services.decide, question.pk, response, actor=approver)
    assert error.field == "response"
    assert "nested" in str(error)


@node(name="produce")
def produce_deep(node_input: dict) -> object:
    if node_input["what"] == "payload":
        return RequestInput(message="Look at this", payload=nested(500))
    return nested(500)


@pytest.mark.parametrize("what", ["output", "payload"])
def test_a_node_producing_a_deep_value_fails_with_a_clear_error(register_workflow, what):
    register_workflow(Workflow(name="produce_deep", edges=[("START", produce_deep)]))
    invocation = services.start("produce_deep", {"what": what})
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.FAILED
    assert f"nested more than {DEFAULT_DEPTH} levels deep" in invocation.error
    assert invocation.unfinished_deliveries == 0  # failed as a node, not as a crashed run
    assert not Interrupt.objects.filter(invocation=invocation).exists()


# --- Decisions store what they validated ------------------------------------------------------


def _decide(question, response, approver):
    return services.decide(question.pk, response, actor=approver)


def _submit(question, response, approver):
    return services.submit_function_responses([{"id": question.pk, "response": response}])


@pytest.mark.parametrize("answer", [_decide, _submit], ids=["decide", "submit"])
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("NaN", "NaN and Infinity are not JSON"),
        ('{"amount": Infinity}', "NaN and Infinity are not JSON"),
        ('"\\ud800"', "lone surrogate"),
        ('"nul \\u0000 inside"', "NUL character"),
    ],
    ids=["nan", "infinity", "surrogate", "nul"],
)
def test_a_json_text_answer_is_checked_once_parsed(approver, answer, text, reason):
    question = ask(response_schema=None)
    error = refused(ResponseValidationError, answer, question, {"result": text}, approver)
    assert reason in str(error)
    assert error.field in ("response", "function_responses[0].response")
    question.refresh_from_db()
    assert question.status == InterruptStatus.PENDING


@pytest.mark.parametrize("response", [None, {"result": "null"}], ids=["none", "json-null"])
def test_a_decision_without_an_answer_is_refused(approver, response):
    question = ask(response_schema=None)
    error = refused(ResponseValidationError, services.decide, question.pk, response, actor=approver)
    assert error.field == "response"
    assert "a decision needs an answer" in str(error)


def test_a_decision_stores_the_parsed_answer(approver):
    question = ask(response_schema=None)
    decision = services.decide(question.pk, {"result": '{"amount": 3}'}, actor=approver)
    assert Decision.objects.get(pk=decision.pk).response == {"amount": 3}


@pytest.mark.parametrize("comment", ["nul \x00", "\udc80 lone"], ids=["nul", "surrogate"])
def test_a_comment_no_database_can_keep_is_refused(approver, comment):
    question = ask()
    error = refused(
        ResponseValidationError,
        services.decide,
        question.pk,
        {"approved": True},
        actor=approver,
        comment=comment,
    )
    assert error.field == "comment"


# --- Ids, names and assignees -----------------------------------------------------------------

UNKEEPABLE_IDS = ["nul\x00id", "\ud800", "x" * 256]


@pytest.mark.parametrize("interrupt_id", UNKEEPABLE_IDS, ids=["nul", "surrogate", "too-long"])
@pytest.mark.parametrize("given", ["dict", "FunctionResponse"])
def test_an_answer_to_an_id_no_interrupt_can_have_names_the_id(interrupt_id, given):
    ask()
    response = {"approved": True}
    item = (
        {"id": interrupt_id, "response": response}
        if given == "dict"
        else FunctionResponse(interrupt_id, "question", response)
    )
    error = refused(ResponseValidationError, services.submit_function_responses, [item])
    assert error.field == "function_responses[0].id"


@pytest.mark.parametrize("name", ["nul\x00", "\ud800", ["a", "list"]])
def test_a_function_response_name_no_database_can_keep_is_refused(name):
    question = ask()
    error = refused(
        ResponseValidationError,
        services.submit_function_responses,
        [{"id": question.pk, "name": name, "response": {"approved": True}}],
    )
    assert error.field == "function_responses[0].name"


@pytest.mark.parametrize("interrupt_id", UNKEEPABLE_IDS, ids=["nul", "surrogate", "too-long"])
@pytest.mark.parametrize("operation", ["decide", "claim", "release", "reassign"])
def test_acting_on_an_id_no_interrupt_can_have_is_unknown(approver, interrupt_id, operation):
    ask()
    calls = {
        "decide": lambda: services.decide(interrupt_id, {"approved": True}, actor=approver),
        "claim": lambda: services.claim(interrupt_id, actor=approver),
        "release": lambda: services.release(interrupt_id, actor=approver),
        "reassign": lambda: services.reassign(interrupt_id, [], actor=approver),
    }
    refused(UnknownInterruptError, calls[operation])


@pytest.mark.parametrize("invocation_id", ["not-a-uuid", "\x00", "\ud800", None, 5])
@pytest.mark.parametrize("operation", [services.cancel, services.retry])
def test_cancelling_or_retrying_what_is_not_an_invocation_id_is_unknown(invocation_id, operation):
    ask()
    refused(InvocationNotFoundError, operation, invocation_id)


@pytest.mark.parametrize(
    ("assignees", "field"),
    [
        (["user:a\x00b"], "assignees[0]"),
        (["user:ada", "group:\udc80"], "assignees[1]"),
        (["user:ada", nested(5000)], "assignees[1]"),
        (nested(5000), "assignees[0]"),
        ("user:ada", "assignees"),
    ],
    ids=["nul", "surrogate", "deep-item", "deep", "string"],
)
def test_reassigning_to_names_no_database_can_compare_is_refused(approver, assignees, field):
    question = ask()
    error = refused(
        ResponseValidationError, services.reassign, question.pk, assignees, actor=approver
    )
    assert error.field == field
    assert len(str(error)) < 500  # a short message, whatever was passed
