"""Both rerun_on_resume tables (DESIGN 3.4), the NodeRunner example, and output with an
interrupt in one execution."""

from typing import Any

import pytest

from workflows.engine import Context, NodeRunner, RequestInput, Workflow, node

from .helpers import COMPLETED, WAITING, Harness, statuses, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")


def two_question_workflow(rerun: bool, calls: list[dict[str, Any]]) -> Workflow:
    """START -> ask (raises "a" and "b") -> after."""

    @node(name="ask", rerun_on_resume=rerun)
    def ask(ctx, node_input):
        calls.append(dict(ctx.resume_inputs))
        missing = [i for i in ("a", "b") if i not in ctx.resume_inputs]
        for interrupt_id in missing:
            yield RequestInput(interrupt_id=interrupt_id, message=f"{node_input}: {interrupt_id}?")
        if not missing:
            yield {"a": ctx.resume_inputs["a"], "b": ctx.resume_inputs["b"], "input": node_input}

    @node
    def after(node_input):
        return {"after": node_input}

    return Workflow(name="wf", edges=[("START", ask, after)])


# --- rerun_on_resume=True ------------------------------------------------------------


@sync
async def test_rerun_true_partial_reexecutes_with_partial_inputs_and_keeps_waiting(store_backend):
    calls: list[dict[str, Any]] = []
    h = Harness(two_question_workflow(True, calls), store_backend)
    first = await h.run("order-7")
    assert first.status == WAITING
    assert set(first.interrupts) == {"a", "b"}
    assert calls == [{}]

    partial = await h.resume({"a": "yes"})
    # Re-executed at once with only the answer received so far.
    assert calls == [{}, {"a": "yes"}]
    assert partial.status == WAITING
    assert set(partial.interrupts) == {"b"}
    assert statuses(partial) == {"wf@1": WAITING, "wf@1/ask@1": WAITING}
    ask = partial.node_runs["wf@1/ask@1"]
    assert ask.run_id == 1  # a resumed node keeps its run_id
    assert ask.interrupt_ids == {"b"}
    assert partial.node_runs["wf@1"].interrupt_ids == {"b"}
    # Re-raising its own still-pending "b" opened no second interrupt event.
    assert [e.long_running_tool_ids for e in partial.events if e.long_running_tool_ids] == [
        ["a", "b"]
    ]

    done = await h.resume({"b": "no"})
    # Resume inputs are cumulative for the run.
    assert calls == [{}, {"a": "yes"}, {"a": "yes", "b": "no"}]
    assert done.status == COMPLETED
    assert done.node_runs["wf@1/ask@1"].output == {"a": "yes", "b": "no", "input": "order-7"}
    assert done.output == {"after": {"a": "yes", "b": "no", "input": "order-7"}}
    assert statuses(done) == {
        "wf@1": COMPLETED,
        "wf@1/ask@1": COMPLETED,
        "wf@1/after@1": COMPLETED,
    }


@sync
async def test_rerun_true_all_reexecutes_once_with_all_inputs(store_backend):
    calls: list[dict[str, Any]] = []
    h = Harness(two_question_workflow(True, calls), store_backend)
    await h.run("order-8")
    done = await h.resume({"a": 1, "b": 2})
    assert calls == [{}, {"a": 1, "b": 2}]
    assert done.status == COMPLETED
    assert done.output == {"after": {"a": 1, "b": 2, "input": "order-8"}}
    assert done.node_runs["wf@1/ask@1"].run_id == 1
    assert done.interrupts == {}


# --- rerun_on_resume=False -----------------------------------------------------------


@sync
async def test_rerun_false_partial_stays_waiting_without_executing(store_backend):
    calls: list[dict[str, Any]] = []
    h = Harness(two_question_workflow(False, calls), store_backend)
    await h.run("x")
    partial = await h.resume({"a": "yes"})
    assert calls == [{}]  # the body did not run again
    assert partial.status == WAITING
    assert set(partial.interrupts) == {"b"}
    assert statuses(partial) == {"wf@1": WAITING, "wf@1/ask@1": WAITING}
    assert partial.node_runs["wf@1/ask@1"].interrupt_ids == {"b"}
    assert partial.node_runs["wf@1/ask@1"].output is None


@sync
async def test_rerun_false_all_in_two_steps_auto_completes_with_dict_of_responses(store_backend):
    calls: list[dict[str, Any]] = []
    h = Harness(two_question_workflow(False, calls), store_backend)
    await h.run("x")
    await h.resume({"a": "yes"})
    done = await h.resume({"b": {"reason": "late"}})
    assert calls == [{}]  # never executed again
    assert done.status == COMPLETED
    expected = {"a": "yes", "b": {"reason": "late"}}
    assert done.node_runs["wf@1/ask@1"].output == expected
    assert done.output == {"after": expected}


@sync
async def test_rerun_false_all_at_once_auto_completes_with_dict_of_responses(store_backend):
    calls: list[dict[str, Any]] = []
    h = Harness(two_question_workflow(False, calls), store_backend)
    await h.run("x")
    done = await h.resume({"b": False, "a": True})
    assert calls == [{}]
    assert done.status == COMPLETED
    assert done.node_runs["wf@1/ask@1"].output == {"a": True, "b": False}
    assert done.output == {"after": {"a": True, "b": False}}


@sync
async def test_rerun_false_single_response_is_the_output(store_backend):
    calls = []

    @node
    def approve(node_input):
        calls.append(node_input)
        return RequestInput(interrupt_id="approve-1", message=f"approve {node_input}?")

    @node
    def book(node_input):
        return f"booked: {node_input}"

    h = Harness(Workflow(name="wf", edges=[("START", approve, book)]), store_backend)
    first = await h.run("trip")
    assert statuses(first) == {"wf@1": WAITING, "wf@1/approve@1": WAITING}
    done = await h.resume({"approve-1": {"approved": True}})
    assert calls == ["trip"]
    assert done.node_runs["wf@1/approve@1"].output == {"approved": True}
    assert done.output == "booked: {'approved': True}"
    assert statuses(done) == {
        "wf@1": COMPLETED,
        "wf@1/approve@1": COMPLETED,
        "wf@1/book@1": COMPLETED,
    }


# --- NodeRunner, DESIGN 3.4 example ----------------------------------------------------


@sync
async def test_node_runner_rerun_carries_prior_output_and_ids_and_merges_new_ones(store_backend):
    seen = {}

    @node(rerun_on_resume=True)
    def step(ctx, node_input):
        seen.update(
            output=ctx.output,
            interrupt_ids=set(ctx.interrupt_ids),
            resume_inputs=dict(ctx.resume_inputs),
            node_input=node_input,
            run_id=ctx.run_id,
        )
        yield RequestInput(interrupt_id="fc-3", message="one more")

    runner = NodeRunner(
        node=step,
        parent_ctx=Context(),
        run_id=1,
        prior_output={"draft": 1},
        prior_interrupt_ids={"fc-2"},
    )
    child_ctx = await runner.run(node_input="doc", resume_inputs={"fc-1": "ok"})
    # Pre-populated before the body ran.
    assert seen == {
        "output": {"draft": 1},
        "interrupt_ids": {"fc-2"},
        "resume_inputs": {"fc-1": "ok"},
        "node_input": "doc",
        "run_id": 1,
    }
    assert child_ctx.output == {"draft": 1}  # no new output: the prior stands
    assert child_ctx.interrupt_ids == {"fc-2", "fc-3"}  # carried forward + newly raised
    assert child_ctx.status == WAITING
    assert child_ctx.run_id == 1
    assert child_ctx.path == "step@1"


@sync
async def test_node_runner_rerun_new_output_replaces_prior(store_backend):
    @node(rerun_on_resume=True)
    def step(ctx, node_input):
        return f"final from {ctx.resume_inputs['fc-1']}"

    runner = NodeRunner(
        node=step,
        parent_ctx=Context(),
        run_id=1,
        prior_output="draft",
        prior_interrupt_ids={"fc-2"},
    )
    child_ctx = await runner.run(node_input="doc", resume_inputs={"fc-1": "ok"})
    assert child_ctx.output == "final from ok"
    assert child_ctx.interrupt_ids == {"fc-2"}
    assert child_ctx.status == WAITING  # output and an unresolved id together


@sync
async def test_node_runner_rerun_without_output_keeps_prior_and_completes(store_backend):
    @node(rerun_on_resume=True)
    def step(ctx, node_input):
        return None

    runner = NodeRunner(
        node=step, parent_ctx=Context(), run_id=1, prior_output="draft", prior_interrupt_ids=set()
    )
    child_ctx = await runner.run(node_input="doc", resume_inputs={"fc-1": "ok"})
    assert child_ctx.output == "draft"
    assert child_ctx.interrupt_ids == set()
    assert child_ctx.status == COMPLETED


@sync
async def test_node_runner_no_rerun_partial_waits_and_all_auto_completes(store_backend):
    calls = []

    @node
    def leaf(node_input):
        calls.append(node_input)
        return "never"

    waiting = await NodeRunner(
        node=leaf,
        parent_ctx=Context(),
        run_id=1,
        prior_output="draft",
        prior_interrupt_ids={"fc-2"},
    ).run(node_input="doc", resume_inputs={"fc-1": "ok"})
    assert waiting.status == WAITING
    assert waiting.output == "draft"
    assert waiting.interrupt_ids == {"fc-2"}

    single = await NodeRunner(
        node=leaf,
        parent_ctx=Context(),
        run_id=1,
        prior_output="draft",
        prior_interrupt_ids={"fc-1"},
    ).run(node_input="doc", resume_inputs={"fc-1": "ok"})
    assert single.status == COMPLETED
    assert single.output == "ok"

    several = await NodeRunner(
        node=leaf,
        parent_ctx=Context(),
        run_id=1,
        prior_interrupt_ids={"fc-1", "fc-2"},
    ).run(node_input="doc", resume_inputs={"fc-1": "ok", "fc-2": 2})
    assert several.status == COMPLETED
    assert several.output == {"fc-1": "ok", "fc-2": 2}
    assert calls == []  # never executed


# --- Output and interrupt in one execution ----------------------------------------------


@pytest.mark.parametrize(
    ("rerun", "revise", "expected_downstream_input", "expected_calls"),
    [
        # Not re-executed: auto-completes with the response as its output.
        (False, False, {"edits": "tighten intro"}, 1),
        # Re-executed without yielding a new output: the prior output stands.
        (True, False, "draft of essay", 2),
        # Re-executed and yields a new output: it replaces the prior one.
        (True, True, "draft of essay, revised: tighten intro", 2),
    ],
)
@sync
async def test_output_and_interrupt_in_one_execution(
    store_backend, rerun, revise, expected_downstream_input, expected_calls
):
    calls = []
    received = []

    @node(name="draft", rerun_on_resume=rerun)
    def draft(ctx, node_input):
        calls.append(dict(ctx.resume_inputs))
        if not ctx.resume_inputs:
            yield f"draft of {node_input}"
            yield RequestInput(interrupt_id="edit", message="any edits?")
        elif revise:
            # The prior output is visible to the re-execution.
            yield f"{ctx.output}, revised: {ctx.resume_inputs['edit']['edits']}"

    @node
    def publish(node_input):
        received.append(node_input)
        return {"published": node_input}

    h = Harness(Workflow(name="wf", edges=[("START", draft, publish)]), store_backend)
    first = await h.run("essay")
    assert first.status == WAITING
    assert statuses(first) == {"wf@1": WAITING, "wf@1/draft@1": WAITING}
    assert first.node_runs["wf@1/draft@1"].output == "draft of essay"
    assert first.node_runs["wf@1/draft@1"].interrupt_ids == {"edit"}
    assert received == []  # downstream not triggered while waiting
    (waiting_event,) = [e for e in first.events if e.long_running_tool_ids]
    assert waiting_event.output == "draft of essay"
    assert waiting_event.path == "wf@1/draft@1"

    done = await h.resume({"edit": {"edits": "tighten intro"}})
    assert len(calls) == expected_calls
    assert received == [expected_downstream_input]
    assert done.status == COMPLETED
    assert done.output == {"published": expected_downstream_input}
    assert done.node_runs["wf@1/draft@1"].output == expected_downstream_input
    assert statuses(done) == {
        "wf@1": COMPLETED,
        "wf@1/draft@1": COMPLETED,
        "wf@1/publish@1": COMPLETED,
    }
