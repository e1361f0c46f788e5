"""submit_function_responses given the wrong kind of argument says what it got and what it
wants, and stores nothing."""

import uuid

import pytest

from tests.workflows.test_services import snapshot, waiting_expense
from workflows import services
from workflows.engine import FunctionResponse
from workflows.engine.errors import ResponseValidationError
from workflows.engine.status import InterruptStatus

pytestmark = pytest.mark.django_db(transaction=True)

WANTS = 'a dict {"id": <interrupt id>, "name": <node name>, "response": ...}'


def refused(responses) -> ResponseValidationError:
    before = snapshot()
    with pytest.raises(ResponseValidationError) as raised:
        services.submit_function_responses(responses)
    assert snapshot() == before
    return raised.value


def test_a_single_dict_instead_of_a_list():
    _, question = waiting_expense()
    error = refused({"id": question.id, "response": {"approved": True}})
    assert error.field == "function_responses"
    assert "wants a list of function responses" in str(error)
    assert "got dict {'id': " in str(error)
    assert "wrap it in a list" in str(error)
    question.refresh_from_db()
    assert question.status == InterruptStatus.PENDING


def test_a_single_function_response_instead_of_a_list():
    _, question = waiting_expense()
    error = refused(FunctionResponse(question.id, "manager_approval", {"approved": True}))
    assert "got FunctionResponse" in str(error)
    assert "wrap it in a list" in str(error)


def test_an_interrupt_object_says_how_to_answer_it():
    _, question = waiting_expense()
    error = refused([question])
    assert error.field == "function_responses[0]"
    assert "got Interrupt" in str(error)
    assert WANTS in str(error)
    assert f'pass {{"id": {question.id!r}, "response": ...}}' in str(error)


def test_a_uuid_is_not_an_interrupt_id():
    invocation, _ = waiting_expense()
    error = refused([invocation.pk])
    assert f"got UUID {invocation.pk!r}" in str(error)
    assert "an invocation id?" in str(error)
    error = refused(uuid.uuid4())  # not even a list
    assert "wants a list" in str(error) and "got UUID" in str(error)


def test_a_bare_string_is_not_a_list_of_ids():
    _, question = waiting_expense()
    error = refused(question.id)
    assert f"got str {question.id!r}" in str(error)


@pytest.mark.parametrize(
    ("item", "field", "message"),
    [
        ({"response": {"approved": True}}, "function_responses[0].id", "got NoneType None"),
        ({"id": 7, "response": {}}, "function_responses[0].id", "got int 7"),
        ({"id": "x"}, "function_responses[0].response", "the answer is missing"),
        (
            {"id": "x", "approved": True},
            "function_responses[0]",
            "unexpected keys ['approved']",
        ),
    ],
)
def test_a_malformed_item_names_its_position_and_problem(item, field, message):
    waiting_expense()
    error = refused([item])
    assert error.field == field
    assert message in str(error)


def test_the_second_item_is_named_by_its_index():
    _, question = waiting_expense()
    error = refused([{"id": question.id, "response": {"approved": True}}, None])
    assert error.field == "function_responses[1]"
    assert "got NoneType None" in str(error)
    question.refresh_from_db()
    assert question.status == InterruptStatus.PENDING
