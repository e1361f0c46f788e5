"""The nesting limit: a Runner given `max_value_depth` refuses deeper inputs and answers
with a named error naming the field, and fails a node whose output, event or question is
deeper; depth is measured without recursion, and a `{"result": "<JSON text>"}` answer too
deep for Python's parser is refused, not a RecursionError."""

import pytest

from workflows.engine import (
    Event,
    FunctionCall,
    FunctionResponse,
    RequestInput,
    Runner,
    Workflow,
    node,
)
from workflows.engine.errors import InputValidationError, ResponseValidationError
from workflows.engine.values import nesting_depth, to_json_value

from .helpers import COMPLETED, FAILED, WAITING, sync

LIMIT = 8


def nested(depth: int, leaf: object = 1) -> object:
    """`depth` levels of lists and objects, alternating, around `leaf`."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_nesting_depth_counts_levels_without_recursion():
    assert nesting_depth(1, 10) == 0
    assert nesting_depth([], 10) == 1
    assert nesting_depth({"a": [1, {"b": []}], "c": 2}, 10) == 4
    assert nesting_depth(nested(LIMIT), 100) == LIMIT
    # Far deeper than Python's recursion limit: counting stops just past the limit.
    assert nesting_depth(nested(200_000), 64) == 65
    loop: list = []
    loop.append(loop)
    assert nesting_depth(loop, 5) == 6  # a cycle ends too


def test_a_value_at_the_limit_is_kept_one_level_deeper_is_refused():
    assert to_json_value(nested(LIMIT), "x", max_depth=LIMIT) == nested(LIMIT)
    with pytest.raises(ValueError, match=f"nested more than {LIMIT} levels deep"):
        to_json_value(nested(LIMIT + 1), "x", max_depth=LIMIT)
    # Brackets inside strings are not levels.
    assert to_json_value(["[[[[[[[[[[[[[["], "x", max_depth=1) == ["[[[[[[[[[[[[[["]


def limited_runner(*nodes, store) -> Runner:
    workflow = Workflow(name="wf", edges=[("START", *nodes)])
    return Runner(workflow, store=store, max_value_depth=LIMIT)


@sync
async def test_an_input_deeper_than_the_limit_is_refused_before_anything_is_stored(store_backend):
    @node
    def echo(node_input):
        return node_input

    store = store_backend.new_store()
    before = await store_backend.snapshot(store)
    runner = limited_runner(echo, store=store)
    with pytest.raises(InputValidationError) as refused:
        await runner.run(nested(LIMIT + 1))
    assert refused.value.field == "input"
    assert f"nested more than {LIMIT} levels deep" in str(refused.value)
    assert await store_backend.snapshot(store) == before
    assert (await runner.run(nested(LIMIT))).status == COMPLETED


@pytest.mark.parametrize(
    "answer",
    [nested(LIMIT + 1), {"result": "[" * (LIMIT + 1) + "]" * (LIMIT + 1)}],
    ids=["value", "json-text"],
)
@sync
async def test_an_answer_deeper_than_the_limit_names_its_place_and_changes_nothing(
    store_backend, answer
):
    @node
    def ask():
        return RequestInput(interrupt_id="q")

    store = store_backend.new_store()
    runner = limited_runner(ask, store=store)
    assert (await runner.run()).status == WAITING
    before = await store_backend.snapshot(store)
    with pytest.raises(ResponseValidationError) as refused:
        await runner.resume([FunctionResponse("q", "ask", answer)])
    assert refused.value.field == "function_responses[0].response"
    assert f"nested more than {LIMIT} levels deep" in str(refused.value)
    assert await store_backend.snapshot(store) == before


@sync
async def test_json_text_too_deep_for_the_parser_is_refused_without_a_limit(store_backend):
    @node
    def ask():
        return RequestInput(interrupt_id="q")

    store = store_backend.new_store()
    runner = Runner(Workflow(name="wf", edges=[("START", ask)]), store=store)
    await runner.run()
    before = await store_backend.snapshot(store)
    with pytest.raises(ResponseValidationError, match="nested too deeply"):
        await runner.resume([FunctionResponse("q", "ask", {"result": "[" * 100_000})])
    assert await store_backend.snapshot(store) == before


def _deep_output():
    return nested(LIMIT + 1)


def _deep_event():
    yield Event(output=nested(LIMIT + 1))


def _deep_call():
    yield Event(
        function_calls=[FunctionCall("call-1", "tool", {"args": nested(LIMIT)})],
        long_running_tool_ids=["call-1"],
    )


def _deep_payload():
    return RequestInput(interrupt_id="q", payload=nested(LIMIT + 1))


def _deep_default_answer():
    return RequestInput(interrupt_id="q", on_timeout=nested(LIMIT + 1))


def _deep_schema():
    return RequestInput(interrupt_id="q", response_schema={"type": "array", "items": nested(LIMIT)})


@pytest.mark.parametrize(
    "body",
    [_deep_output, _deep_event, _deep_call, _deep_payload, _deep_default_answer, _deep_schema],
    ids=["output", "event", "function-call", "payload", "default-answer", "schema"],
)
@sync
async def test_a_node_producing_a_value_deeper_than_the_limit_fails_with_a_clear_error(
    store_backend, body
):
    @node
    def first():
        return "upstream"

    deep = node(body, name="deep")
    runner = limited_runner(first, deep, store=store_backend.new_store())
    result = await runner.run()
    assert result.status == FAILED
    assert f"nested more than {LIMIT} levels deep" in result.error
    assert "node 'deep'" in result.error
    assert result.node_runs["wf@1/first@1"].status == COMPLETED
    assert not result.interrupts
