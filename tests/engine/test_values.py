"""What may be stored: values every store keeps alike, bad values refused with a named
error before anything is written, node timeouts."""

import asyncio
import datetime
import decimal

import pytest

from workflows.engine import RequestInput, Runner, Workflow, node
from workflows.engine.errors import (
    InputValidationError,
    PayloadTooLargeError,
    ResponseValidationError,
)

from .helpers import COMPLETED, FAILED, WAITING, Harness, statuses, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@sync
async def test_outputs_are_stored_as_django_json_encodes_them(store_backend):
    @node
    def compute():
        return {
            "amount": decimal.Decimal("12.50"),
            "at": datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC),
            "day": datetime.date(2026, 1, 2),
            "pair": (1, 2),
        }

    @node
    def after(node_input):
        return node_input

    h = Harness(Workflow(name="wf", edges=[("START", compute, after)]), store_backend)
    done = await h.run()
    assert done.status == COMPLETED
    expected = {"amount": "12.50", "at": "2026-01-02T03:04:05.678Z", "day": "2026-01-02"}
    assert done.output == {**expected, "pair": [1, 2]}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"raw bytes", "type bytes cannot be stored as JSON"),
        ({1, 2}, "type set cannot be stored as JSON"),
        (float("nan"), "NaN and Infinity are not JSON"),
        ({"x": float("inf")}, "NaN and Infinity are not JSON"),
        ("nul \x00 inside", "NUL character"),
        ("\ud800", "lone surrogate"),
        (_deep(10_000), "nested too deeply"),
    ],
)
@sync
async def test_an_output_no_store_can_keep_fails_its_node_and_keeps_upstream(
    store_backend, value, reason
):
    @node
    def upstream():
        return "fine"

    @node
    def bad():
        return value

    h = Harness(Workflow(name="wf", edges=[("START", upstream, bad)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert reason in result.error
    assert "the output of node 'bad'" in result.error
    assert statuses(result) == {
        "wf@1": FAILED,
        "wf@1/upstream@1": COMPLETED,
        "wf@1/bad@1": FAILED,
    }
    assert result.node_runs["wf@1/upstream@1"].output == "fine"


@sync
async def test_an_exception_message_with_nul_is_kept_readable(store_backend):
    @node
    def bad():
        raise ValueError("broken \x00 text \ud800")

    h = Harness(Workflow(name="wf", edges=[("START", bad)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert result.error == "ValueError: broken \\x00 text \\ud800"


@pytest.mark.parametrize(
    ("request_input", "reason"),
    [
        (RequestInput(interrupt_id="x" * 256), "over 255"),
        (RequestInput(interrupt_id="nul\x00id"), "NUL character"),
        (RequestInput(payload={"v": float("nan")}), "NaN"),
        (RequestInput(message="hello \x00"), "NUL character"),
    ],
)
@sync
async def test_an_interrupt_no_store_can_keep_fails_its_node(store_backend, request_input, reason):
    @node
    def ask():
        return request_input

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert reason in result.error
    assert result.interrupts == {}


@sync
async def test_an_over_long_route_fails_its_node_on_every_store(store_backend):
    @node
    def choose(ctx):
        ctx.route = "r" * 201
        return "chosen"

    @node
    def never():
        return "no"

    h = Harness(Workflow(name="wf", edges=[("START", choose, {"r" * 201: never})]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert "route of node 'choose'" in result.error and "over 200" in result.error


BAD_VALUES = [
    float("nan"),
    float("inf"),
    {"nested": float("-inf")},
    "\ud800",
    "text \x00 with nul",
    _deep(10_000),
]


@pytest.mark.parametrize("value", BAD_VALUES)
@sync
async def test_a_bad_answer_is_refused_and_changes_nothing(store_backend, value):
    @node
    def ask():
        return RequestInput(interrupt_id="q")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    waiting = await h.run()
    assert waiting.status == WAITING
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as raised:
        await h.resume({"q": value})
    assert raised.value.code == "invalid_response"
    assert raised.value.field == "function_responses[0].response"
    assert await h.snapshot() == before


@pytest.mark.parametrize("value", BAD_VALUES)
@sync
async def test_a_bad_input_is_refused_before_anything_is_stored(store_backend, value):
    @node
    def echo(node_input):
        return node_input

    store = store_backend.new_store()
    before = await store_backend.snapshot(store)
    with pytest.raises(InputValidationError) as raised:
        await Runner(Workflow(name="wf", edges=[("START", echo)]), store=store).run(value)
    assert raised.value.code == "invalid_input"
    assert await store_backend.snapshot(store) == before


@sync
async def test_size_limit_applies_to_inputs_outputs_and_answers(store_backend):
    @node
    def ask(node_input):
        return RequestInput(interrupt_id="big-q")

    @node
    def grow(node_input):
        return "x" * 5_000

    store = store_backend.new_store()
    limited = Runner(Workflow(name="wf", edges=[("START", ask, grow)]), store=store)
    limited.max_value_bytes = 1_000
    with pytest.raises(PayloadTooLargeError) as too_big:
        await limited.run("y" * 2_000)
    assert too_big.value.code == "payload_too_large"
    waiting = await limited.run("small")
    assert waiting.status == WAITING
    with pytest.raises(PayloadTooLargeError):
        await limited.resume([_answer("big-q", "z" * 2_000)])
    failed = await limited.resume([_answer("big-q", "ok")])
    assert failed.status == FAILED
    assert "over the limit of 1000" in failed.error


def _answer(interrupt_id, value):
    from workflows.engine import FunctionResponse

    return FunctionResponse(interrupt_id, "answer", value)


@sync
async def test_a_node_over_its_timeout_fails_with_a_clear_error(store_backend):
    @node(timeout=0.05)
    async def slow():
        await asyncio.Event().wait()  # never set: only the timeout ends it

    @node(timeout=5)
    async def raises_its_own_timeout():
        raise TimeoutError("upstream API timed out")

    h = Harness(Workflow(name="wf", edges=[("START", slow)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert result.error == "NodeTimeoutError: node 'slow' timed out after 0.05 s"

    h2 = Harness(Workflow(name="wf2", edges=[("START", raises_its_own_timeout)]), store_backend)
    own = await h2.run()
    assert own.error == "TimeoutError: upstream API timed out"


@sync
async def test_a_schema_error_reports_every_problem_with_its_path(store_backend):
    schema = {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "lines": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
        "required": ["approved", "comment"],
    }

    @node
    def ask():
        return RequestInput(interrupt_id="many-q", response_schema=schema)

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    await h.run()
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as raised:
        await h.resume({"many-q": {"approved": "yes", "lines": [1, -2, "x"]}})
    fields = sorted(field for field, _ in raised.value.problems)
    assert fields == ["approved", "comment", "lines.1", "lines.2"]
    assert raised.value.field in fields
    assert "lines.1" in str(raised.value) and "comment" in str(raised.value)
    assert await h.snapshot() == before
