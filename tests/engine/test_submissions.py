"""Answering interrupts: validation before storing, unwrap, idempotent repeats, routing by
interrupt id, fresh runners, cancel, function-call interrupts and id uniqueness."""

import asyncio
from collections import Counter

import pytest

from workflows.engine import (
    Event,
    FunctionCall,
    FunctionResponse,
    InterruptStatus,
    RequestInput,
    Workflow,
    node,
)
from workflows.engine.errors import (
    InterruptNotPendingError,
    MultipleInvocationsError,
    ResponseValidationError,
    UnknownInterruptError,
)

from .helpers import (
    CANCELLED,
    COMPLETED,
    FAILED,
    WAITING,
    Harness,
    interrupt_events,
    statuses,
    sync,
)

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")

EXPENSE_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "comment": {"type": "string"}},
    "required": ["approved"],
}


def approval_workflow(name: str = "expense", schema=EXPENSE_SCHEMA) -> Workflow:
    @node
    def submit(node_input):
        return {"amount": node_input}

    @node
    def approve(ctx, node_input):
        return RequestInput(
            interrupt_id=f"approve-{node_input['amount']}",
            message="approve?",
            payload=node_input,
            response_schema=schema,
        )

    @node
    def record(node_input):
        return {"decision": node_input}

    return Workflow(name=name, edges=[("START", submit, approve, record)])


# --- Bad submissions leave the store unchanged -----------------------------------------


@sync
async def test_unknown_interrupt_id_leaves_store_unchanged(store_backend):
    h = Harness(approval_workflow(), store_backend)
    await h.run(10)
    before = await h.snapshot()
    with pytest.raises(UnknownInterruptError) as excinfo:
        await h.resume({"no-such-id": {"approved": True}})
    assert excinfo.value.interrupt_id == "no-such-id"
    assert await h.snapshot() == before
    # A known id beside an unknown one: nothing of the submission is stored.
    with pytest.raises(UnknownInterruptError):
        await h.resume({"approve-10": {"approved": True}, "no-such-id": 1})
    assert await h.snapshot() == before


@sync
async def test_conflicting_repeat_leaves_store_unchanged_and_identical_repeat_succeeds(
    store_backend,
):
    h = Harness(approval_workflow(), store_backend)
    await h.run(10)
    done = await h.resume({"approve-10": {"approved": True, "comment": "fine"}})
    assert done.status == COMPLETED
    before = await h.snapshot()
    with pytest.raises(InterruptNotPendingError) as excinfo:
        await h.resume({"approve-10": {"approved": False}})
    assert excinfo.value.interrupt_id == "approve-10"
    assert await h.snapshot() == before

    repeat = await h.resume({"approve-10": {"approved": True, "comment": "fine"}})
    assert repeat.status == COMPLETED
    assert repeat.output == {"decision": {"approved": True, "comment": "fine"}}
    assert await h.snapshot() == before  # idempotent: nothing new stored


@pytest.mark.parametrize(
    ("response", "field"),
    [
        ({"approved": "yes"}, "approved"),  # "yes" is not true: never coerced
        ({"approved": 1}, "approved"),
        ({"comment": "no decision"}, "approved"),  # missing required field
        ({"approved": True, "comment": 5}, "comment"),
        ("approved", "response"),  # not an object at all
    ],
)
@sync
async def test_invalid_payload_names_the_field_and_leaves_store_unchanged(
    store_backend, response, field
):
    h = Harness(approval_workflow(), store_backend)
    await h.run(10)
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as excinfo:
        await h.resume({"approve-10": response})
    assert excinfo.value.interrupt_id == "approve-10"
    assert excinfo.value.field == field
    assert repr(field) in str(excinfo.value)
    assert await h.snapshot() == before
    assert (await h.interrupt("approve-10")).status == InterruptStatus.PENDING


@sync
async def test_one_invalid_answer_rejects_the_whole_submission(store_backend):
    @node
    def ask(node_input):
        yield RequestInput(interrupt_id="ok", response_schema=bool)
        yield RequestInput(interrupt_id="count", response_schema=int)

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    await h.run()
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as excinfo:
        await h.resume({"ok": True, "count": "3"})
    assert excinfo.value.field == "response"
    assert excinfo.value.interrupt_id == "count"
    assert await h.snapshot() == before
    done = await h.resume({"ok": True, "count": 3})
    assert done.output == {"ok": True, "count": 3}


@sync
async def test_answers_for_two_invocations_in_one_call_leave_store_unchanged(store_backend):
    h = Harness(approval_workflow(), store_backend)
    first = await h.run(10)
    second = await h.run(20)
    assert first.invocation_id != second.invocation_id
    before = await h.snapshot()
    with pytest.raises(MultipleInvocationsError) as excinfo:
        await h.resume({"approve-10": {"approved": True}, "approve-20": {"approved": True}})
    assert excinfo.value.invocation_ids == sorted([first.invocation_id, second.invocation_id])
    assert await h.snapshot() == before

    # Each answered on its own, each invocation completes independently.
    done_second = await h.resume({"approve-20": {"approved": False}})
    assert done_second.invocation_id == second.invocation_id
    assert done_second.output == {"decision": {"approved": False}}
    still = await h.result(first.invocation_id)
    assert still.status == WAITING
    assert set(still.interrupts) == {"approve-10"}


@sync
async def test_result_wrapper_with_json_string_is_unwrapped_before_validation(store_backend):
    h = Harness(approval_workflow(), store_backend)
    await h.run(10)
    done = await h.resume({"approve-10": {"result": '{"approved": true, "comment": "ok"}'}})
    assert done.status == COMPLETED
    assert done.output == {"decision": {"approved": True, "comment": "ok"}}
    (answer_event,) = [e for e in done.events if e.function_responses]
    assert answer_event.author == "user"
    assert answer_event.path == "expense@1/approve@1"
    assert answer_event.function_responses[0].response == {"approved": True, "comment": "ok"}
    # The stored answer is the unwrapped one: an identical repeat, wrapped or not, is a no-op.
    before = await h.snapshot()
    await h.resume({"approve-10": {"approved": True, "comment": "ok"}})
    await h.resume({"approve-10": {"result": {"approved": True, "comment": "ok"}}})
    assert await h.snapshot() == before


@sync
async def test_result_wrapper_with_plain_value_and_bool_schema(store_backend):
    h = Harness(approval_workflow(schema=bool), store_backend)
    first = await h.run(10)
    assert first.interrupts["approve-10"].response_schema == {"type": "boolean"}
    before = await h.snapshot()
    for bad in ("yes", {"result": "yes"}, 1, "true"):
        with pytest.raises(ResponseValidationError) as excinfo:
            await h.resume({"approve-10": bad})
        assert excinfo.value.field == "response"
        assert await h.snapshot() == before
    done = await h.resume({"approve-10": {"result": "true"}})  # JSON string parsed
    assert done.output == {"decision": True}


# --- Routing by interrupt id -------------------------------------------------------------


@sync
async def test_resume_from_a_fresh_runner_on_the_same_store(store_backend):
    store = store_backend.new_store()
    first = await Harness(approval_workflow(), store_backend, store=store).run(10)
    assert first.status == WAITING

    fresh = Harness(approval_workflow(), store_backend, store=store)  # e.g. another process
    done = await fresh.resume({"approve-10": {"approved": True}})
    assert done.invocation_id == first.invocation_id
    assert done.status == COMPLETED
    assert done.output == {"decision": {"approved": True}}
    assert statuses(done) == {
        "expense@1": COMPLETED,
        "expense@1/submit@1": COMPLETED,
        "expense@1/approve@1": COMPLETED,
        "expense@1/record@1": COMPLETED,
    }
    assert (await fresh.result(first.invocation_id)).output == {"decision": {"approved": True}}


@sync
async def test_runner_of_another_workflow_does_not_know_the_interrupt(store_backend):
    store = store_backend.new_store()
    await Harness(approval_workflow(), store_backend, store=store).run(10)
    other = Harness(approval_workflow(name="other"), store_backend, store=store)
    before = await store_backend.snapshot(store)
    with pytest.raises(UnknownInterruptError):
        await other.resume({"approve-10": {"approved": True}})
    assert await store_backend.snapshot(store) == before


# --- Cancel ------------------------------------------------------------------------------


@sync
async def test_cancel_cancels_pending_interrupts_and_rejects_later_answers(store_backend):
    @node
    def ask(node_input):
        yield RequestInput(interrupt_id="c-1")
        yield RequestInput(interrupt_id="c-2")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    first = await h.run()
    await h.resume({"c-1": "partial"})

    cancelled = await h.cancel(first.invocation_id)
    assert cancelled.status == CANCELLED
    assert cancelled.interrupts == {}
    assert statuses(cancelled) == {"wf@1": CANCELLED, "wf@1/ask@1": CANCELLED}
    assert (await h.interrupt("c-2")).status == InterruptStatus.CANCELLED
    assert (await h.interrupt("c-1")).status == InterruptStatus.RESOLVED

    before = await h.snapshot()
    with pytest.raises(InterruptNotPendingError) as excinfo:
        await h.resume({"c-2": "too late"})
    assert excinfo.value.status == "cancelled"
    assert await h.snapshot() == before
    assert (await h.result(first.invocation_id)).status == CANCELLED


@sync
async def test_cancel_while_running_stops_at_the_next_checkpoint(store_backend):
    calls = []
    holder = {}

    @node
    async def first(ctx, node_input):
        calls.append("first")
        # Another process cancels the invocation while this node runs.
        await holder["runner"].cancel(ctx.invocation_id)
        return "done"

    @node
    def second(node_input):
        calls.append("second")
        return node_input

    h = Harness(Workflow(name="wf", edges=[("START", first, second)]), store_backend)
    holder["runner"] = h.runner
    result = await h.run()
    assert result.status == CANCELLED
    assert calls == ["first"]  # the next node never started
    # Nothing the cancelled execution did after the cancel was stored.
    assert statuses(result) == {"wf@1": CANCELLED, "wf@1/first@1": CANCELLED}
    assert result.output is None


# --- Function-call interrupts -------------------------------------------------------------


@sync
async def test_function_call_interrupt_from_a_nested_leaf(store_backend):
    @node
    def request(node_input):
        yield Event(
            function_calls=[FunctionCall("fc-1", "approve", {"amount": node_input})],
            long_running_tool_ids=["fc-1"],
        )

    @node
    def after(node_input):
        return {"approved": node_input}

    inner = Workflow(name="inner", edges=[("START", request, after)])
    outer = Workflow(name="outer", edges=[("START", inner)])
    h = Harness(outer, store_backend)
    first = await h.run(125)
    assert first.status == WAITING
    assert list(first.interrupts) == ["fc-1"]
    assert first.interrupts["fc-1"].interrupt_id == "fc-1"
    assert first.interrupts["fc-1"].payload == {"name": "approve", "args": {"amount": 125}}
    assert interrupt_events(first) == [("outer@1/inner@1/request@1", ["fc-1"])]
    (call_event,) = [e for e in first.events if e.function_calls]
    assert call_event.function_calls == [FunctionCall("fc-1", "approve", {"amount": 125})]
    # Ancestors wrote no events at all: their WAITING state is in the checkpoint.
    assert {e.path for e in first.events} == {"outer@1/inner@1/request@1"}
    assert statuses(first) == {
        "outer@1": WAITING,
        "outer@1/inner@1": WAITING,
        "outer@1/inner@1/request@1": WAITING,
    }
    assert first.node_runs["outer@1"].interrupt_ids == {"fc-1"}

    done = await h.resume_frs([FunctionResponse("fc-1", "approve", {"ok": True})])
    assert done.status == COMPLETED
    assert done.output == {"approved": {"ok": True}}


# --- Interrupt id uniqueness ---------------------------------------------------------------


@sync
async def test_interrupt_id_held_by_another_invocation_fails_naming_the_id(store_backend):
    @node
    def ask(node_input):
        return RequestInput(interrupt_id="shared-id")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    first = await h.run(1)
    assert first.status == WAITING
    second = await h.run(2)
    assert second.status == FAILED
    assert "shared-id" in second.error
    assert statuses(second) == {"wf@1": FAILED, "wf@1/ask@1": FAILED}
    assert (await h.interrupt("shared-id")).invocation_id == first.invocation_id
    assert set(second.interrupts) == set()
    # The first invocation is untouched and still answerable.
    done = await h.resume({"shared-id": "answer"})
    assert done.invocation_id == first.invocation_id
    assert done.output == "answer"


@sync
async def test_interrupt_id_answered_in_an_earlier_loop_iteration_fails(store_backend):
    @node
    def ask(node_input):
        # A fixed id: the second loop iteration raises an id its first one already used.
        return RequestInput(interrupt_id="same-every-time")

    @node(rerun_on_resume=True)
    def decide(ctx, node_input):
        ctx.route = "again"
        return node_input

    h = Harness(
        Workflow(name="wf", edges=[("START", ask, decide), (decide, {"again": ask})]), store_backend
    )
    await h.run()
    second = await h.resume({"same-every-time": "first answer"})
    assert second.status == FAILED
    assert "'same-every-time'" in second.error
    assert "wf@1/ask@1" in second.error  # names the holder too
    assert second.node_runs["wf@1/ask@2"].status == FAILED


@sync
async def test_rerun_node_may_reraise_its_own_pending_id(store_backend):
    calls = []

    @node(rerun_on_resume=True)
    def collect(ctx, node_input):
        calls.append(sorted(ctx.resume_inputs))
        for interrupt_id in ("x", "y"):
            if interrupt_id not in ctx.resume_inputs:
                yield RequestInput(interrupt_id=interrupt_id)
        if len(ctx.resume_inputs) == 2:
            yield dict(ctx.resume_inputs)

    h = Harness(Workflow(name="wf", edges=[("START", collect)]), store_backend)
    await h.run()
    partial = await h.resume({"y": 2})
    assert partial.status == WAITING
    assert set(partial.interrupts) == {"x"}
    assert (await h.interrupt("x")).path == "wf@1/collect@1"
    done = await h.resume({"x": 1})
    assert done.output == {"x": 1, "y": 2}
    assert calls == [[], ["y"], ["x", "y"]]


@sync
async def test_generated_interrupt_ids_are_unique(store_backend):
    @node
    def ask(node_input):
        yield RequestInput(message="one")
        yield RequestInput(message="two")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    results = await asyncio.gather(h.run(), h.run())
    ids = [i for r in results for i in r.interrupts]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(r.status == WAITING for r in results)


# --- Concurrent and mixed submissions, idempotency key ----------------------------------


async def answered(h: Harness, *interrupt_ids: str) -> None:
    """Wait until the store holds an answer to each of the interrupts."""
    while True:
        records = await h.store.load_interrupts(list(interrupt_ids))
        if all(r.status == InterruptStatus.RESOLVED for r in records.values()):
            return
        await asyncio.sleep(0.001)


@sync
async def test_concurrent_answers_to_one_invocation_each_apply_once(store_backend):
    calls: Counter = Counter()
    keys: dict[int, set[str]] = {}
    running = asyncio.Event()

    @node(parallel_worker=True, rerun_on_resume=True)
    async def item(ctx, node_input):
        calls[node_input] += 1
        keys.setdefault(node_input, set()).add(ctx.idempotency_key)
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id=f"q{node_input}")
        if node_input == 1:
            # The other answers arrive while this run holds the execution lease.
            running.set()
            await answered(h, "q2", "q3")
        return ctx.resume_inputs[f"q{node_input}"]

    async def answer_the_others() -> list:
        await running.wait()
        return await asyncio.gather(*(h.resume({f"q{i}": i * 10}) for i in (2, 3)))

    h = Harness(Workflow(name="wf", edges=[("START", item)]), store_backend)
    first = await h.run([1, 2, 3])
    result, others = await asyncio.gather(h.resume({"q1": 10}), answer_the_others())
    assert {r.invocation_id for r in [result, *others]} == {first.invocation_id}
    done = await h.result(first.invocation_id)
    assert done.status == COMPLETED
    assert done.output == [10, 20, 30]
    assert calls == Counter({1: 2, 2: 2, 3: 2})  # each item re-ran once, for its answer
    # The idempotency key is the same across the resume of one node run.
    assert keys == {i: {f"{first.invocation_id}:wf@1/item@1/item@{i}"} for i in (1, 2, 3)}


@sync
async def test_identical_repeat_with_a_new_answer_accepts_the_new_one(store_backend):
    @node
    def ask(node_input):
        yield RequestInput(interrupt_id="m1")
        yield RequestInput(interrupt_id="m2")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    await h.run()
    await h.resume({"m1": "one"})
    done = await h.resume({"m1": "one", "m2": "two"})
    assert done.status == COMPLETED
    assert done.output == {"m1": "one", "m2": "two"}
    answers = [r.id for e in done.events for r in e.function_responses]
    assert answers == ["m1", "m2"]  # the repeat wrote nothing
