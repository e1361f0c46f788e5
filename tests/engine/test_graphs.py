"""Nested workflows, joins, loops, parallel workers and dynamic children across resumes."""

from collections import Counter

import pytest

from workflows.engine import JoinNode, RequestInput, Workflow, node
from workflows.engine.errors import InterruptNotPendingError

from .helpers import (
    COMPLETED,
    FAILED,
    PENDING,
    WAITING,
    Harness,
    interrupt_events,
    statuses,
    sync,
)

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")

# --- Nested workflows whose children both interrupt --------------------------------------


def branch(letter: str, calls: Counter) -> Workflow:
    """inner_<letter>: START -> prep -> ask (interrupt "i<letter>") -> post."""

    @node(name="prep")
    def prep(node_input):
        calls[f"prep_{letter}"] += 1
        return f"{node_input}/{letter}"

    @node(name="ask")
    def ask(node_input):
        calls[f"ask_{letter}"] += 1
        return RequestInput(interrupt_id=f"i{letter}", message=f"check {node_input}")

    @node(name="post")
    def post(node_input):
        calls[f"post_{letter}"] += 1
        return f"{letter}:{node_input}"

    return Workflow(name=f"inner_{letter}", edges=[("START", prep, ask, post)])


@sync
async def test_nested_workflows_resume_one_child_at_a_time_then_join(store_backend):
    calls: Counter = Counter()

    @node
    def final(node_input):
        calls["final"] += 1
        return {"final": node_input}

    inner_a, inner_b = branch("a", calls), branch("b", calls)
    join = JoinNode("join")
    outer = Workflow(
        name="outer",
        edges=[("START", inner_a, join), ("START", inner_b, join), (join, final)],
    )
    h = Harness(outer, store_backend)

    first = await h.run("req")
    assert first.status == WAITING
    assert set(first.interrupts) == {"ia", "ib"}
    assert statuses(first) == {
        "outer@1": WAITING,
        "outer@1/inner_a@1": WAITING,
        "outer@1/inner_a@1/prep@1": COMPLETED,
        "outer@1/inner_a@1/ask@1": WAITING,
        "outer@1/inner_b@1": WAITING,
        "outer@1/inner_b@1/prep@1": COMPLETED,
        "outer@1/inner_b@1/ask@1": WAITING,
    }
    assert first.node_runs["outer@1"].interrupt_ids == {"ia", "ib"}
    assert first.node_runs["outer@1/inner_a@1"].interrupt_ids == {"ia"}
    # Only the leaves wrote interrupt events.
    assert sorted(interrupt_events(first)) == [
        ("outer@1/inner_a@1/ask@1", ["ia"]),
        ("outer@1/inner_b@1/ask@1", ["ib"]),
    ]

    second = await h.resume({"ia": "ok-a"})
    assert second.status == WAITING
    assert set(second.interrupts) == {"ib"}
    assert statuses(second) == {
        "outer@1": WAITING,
        "outer@1/inner_a@1": COMPLETED,
        "outer@1/inner_a@1/prep@1": COMPLETED,
        "outer@1/inner_a@1/ask@1": COMPLETED,
        "outer@1/inner_a@1/post@1": COMPLETED,
        "outer@1/inner_b@1": WAITING,
        "outer@1/inner_b@1/prep@1": COMPLETED,
        "outer@1/inner_b@1/ask@1": WAITING,
        "outer@1/join@1": PENDING,  # collecting: has inner_a, waits for inner_b
    }
    assert second.node_runs["outer@1"].interrupt_ids == {"ib"}
    assert second.node_runs["outer@1/inner_a@1"].output == "a:ok-a"
    assert second.node_runs["outer@1/join@1"].output is None
    # Only the answered child and its downstream ran; everything else ran exactly once.
    assert calls == Counter(prep_a=1, ask_a=1, post_a=1, prep_b=1, ask_b=1)

    done = await h.resume({"ib": "ok-b"})
    assert done.status == COMPLETED
    joined = {"inner_a": "a:ok-a", "inner_b": "b:ok-b"}
    assert done.node_runs["outer@1/join@1"].output == joined
    assert done.node_runs["outer@1/join@1"].run_id == 1
    assert done.output == {"final": joined}
    assert set(statuses(done).values()) == {COMPLETED}
    assert "outer@1/final@1" in done.node_runs
    assert calls == Counter(prep_a=1, ask_a=1, post_a=1, prep_b=1, ask_b=1, post_b=1, final=1)
    assert done.interrupts == {}


# --- A join waiting across a resume --------------------------------------------------------


@sync
async def test_join_waits_across_a_resume(store_backend):
    calls: Counter = Counter()

    @node
    def fast(node_input):
        calls["fast"] += 1
        return node_input * 2

    @node
    def ask(node_input):
        calls["ask"] += 1
        return RequestInput(interrupt_id="need", response_schema={"type": "integer"})

    class CountingJoin(JoinNode):
        def run(self, ctx, node_input):
            calls["join"] += 1
            return super().run(ctx, node_input)

    @node
    def total(node_input):
        return node_input["fast"] + node_input["ask"]

    join = CountingJoin("join")
    h = Harness(
        Workflow(name="wf", edges=[("START", fast, join), ("START", ask, join), (join, total)]),
        store_backend,
    )
    first = await h.run(5)
    assert statuses(first) == {
        "wf@1": WAITING,
        "wf@1/fast@1": COMPLETED,
        "wf@1/ask@1": WAITING,
        "wf@1/join@1": PENDING,
    }
    assert calls == Counter(fast=1, ask=1)  # join did not run
    assert not [e for e in first.events if e.path.startswith("wf@1/join")]

    done = await h.resume({"need": 7})
    assert calls == Counter(fast=1, ask=1, join=1)
    assert done.node_runs["wf@1/join@1"].output == {"fast": 10, "ask": 7}
    assert done.output == 17
    assert statuses(done) == {
        "wf@1": COMPLETED,
        "wf@1/fast@1": COMPLETED,
        "wf@1/ask@1": COMPLETED,
        "wf@1/join@1": COMPLETED,
        "wf@1/total@1": COMPLETED,
    }


@sync
async def test_join_fed_by_start_keys_it_start(store_backend):
    @node
    def other(node_input):
        return node_input + 1

    join = JoinNode("join")
    h = Harness(Workflow(name="wf", edges=[("START", join), ("START", other, join)]), store_backend)
    done = await h.run(1)
    assert done.output == {"START": 1, "other": 2}


# --- Review loop with a routed back-edge -------------------------------------------------

REVIEW_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["approved"],
}


def review_loop(calls: Counter) -> Workflow:
    @node
    def write(ctx, node_input):
        calls["write"] += 1
        topic = node_input if isinstance(node_input, str) else node_input["topic"]
        return {"topic": topic, "version": ctx.run_id}

    @node(rerun_on_resume=True)
    def review(ctx, node_input):
        calls["review"] += 1
        if not ctx.resume_inputs:
            return RequestInput(
                message=f"review v{node_input['version']}",
                payload=node_input,
                response_schema=REVIEW_SCHEMA,
            )
        (answer,) = ctx.resume_inputs.values()
        ctx.route = "approve" if answer["approved"] else "revise"
        return node_input

    @node
    def publish(node_input):
        calls["publish"] += 1
        return f"published {node_input['topic']} v{node_input['version']}"

    return Workflow(
        name="loop",
        edges=[("START", write, review), (review, {"approve": publish, "revise": write})],
    )


@sync
async def test_review_loop_fresh_run_ids_and_stale_answers(store_backend):
    calls: Counter = Counter()
    h = Harness(review_loop(calls), store_backend)

    first = await h.run("essay")
    assert first.status == WAITING
    (first_id,) = first.interrupts
    assert first.interrupts[first_id].payload == {"topic": "essay", "version": 1}
    assert first.interrupts[first_id].response_schema == REVIEW_SCHEMA

    second = await h.resume({first_id: {"approved": False, "note": "too short"}})
    assert second.status == WAITING
    (second_id,) = second.interrupts
    assert second_id != first_id
    assert statuses(second) == {
        "loop@1": WAITING,
        "loop@1/write@1": COMPLETED,
        "loop@1/review@1": COMPLETED,
        "loop@1/write@2": COMPLETED,
        "loop@1/review@2": WAITING,
    }
    assert second.node_runs["loop@1/review@1"].route == "revise"
    assert second.node_runs["loop@1/review@2"].run_id == 2
    assert second.node_runs["loop@1/review@2"].interrupt_ids == {second_id}
    assert second.interrupts[second_id].payload == {"topic": "essay", "version": 2}
    assert (await h.interrupt(first_id)).path == "loop@1/review@1"
    assert (await h.interrupt(second_id)).path == "loop@1/review@2"

    # A stale answer to the already-resolved first interrupt with a different value.
    before = await h.snapshot()
    with pytest.raises(InterruptNotPendingError) as excinfo:
        await h.resume({first_id: {"approved": True}})
    assert excinfo.value.interrupt_id == first_id
    assert excinfo.value.status == "resolved"
    assert await h.snapshot() == before

    # An identical repeat of the accepted answer is an idempotent success.
    calls_before = Counter(calls)
    repeat = await h.resume({first_id: {"approved": False, "note": "too short"}})
    assert repeat.status == WAITING
    assert set(repeat.interrupts) == {second_id}
    assert len(repeat.events) == len(second.events)  # no new events
    assert await h.snapshot() == before
    assert calls == calls_before

    done = await h.resume({second_id: {"approved": True}})
    assert done.status == COMPLETED
    assert done.output == "published essay v2"
    assert statuses(done) == {
        "loop@1": COMPLETED,
        "loop@1/write@1": COMPLETED,
        "loop@1/review@1": COMPLETED,
        "loop@1/write@2": COMPLETED,
        "loop@1/review@2": COMPLETED,
        "loop@1/publish@1": COMPLETED,
    }
    assert done.node_runs["loop@1/review@2"].route == "approve"
    assert calls == Counter(write=2, review=4, publish=1)


# --- Parallel worker resumed item by item ----------------------------------------------


@sync
async def test_parallel_worker_items_resume_one_by_one_in_input_order(store_backend):
    calls: Counter = Counter()

    @node(parallel_worker=True, rerun_on_resume=True)
    def check(ctx, node_input):
        calls[node_input] += 1
        if node_input % 2:
            return node_input * 10
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id=f"item-{node_input}", payload=node_input)
        return ctx.resume_inputs[f"item-{node_input}"]

    @node
    def summary(node_input):
        return {"results": node_input}

    h = Harness(Workflow(name="wf", edges=[("START", check, summary)]), store_backend)
    first = await h.run([1, 2, 3, 4])
    assert first.status == WAITING
    assert set(first.interrupts) == {"item-2", "item-4"}
    assert statuses(first) == {
        "wf@1": WAITING,
        "wf@1/check@1": WAITING,
        "wf@1/check@1/check@1": COMPLETED,
        "wf@1/check@1/check@2": WAITING,
        "wf@1/check@1/check@3": COMPLETED,
        "wf@1/check@1/check@4": WAITING,
    }
    assert first.node_runs["wf@1/check@1"].interrupt_ids == {"item-2", "item-4"}
    assert sorted(interrupt_events(first)) == [
        ("wf@1/check@1/check@2", ["item-2"]),
        ("wf@1/check@1/check@4", ["item-4"]),
    ]

    # Answer the last item first: only that item completes.
    second = await h.resume({"item-4": "four"})
    assert second.status == WAITING
    assert set(second.interrupts) == {"item-2"}
    assert second.node_runs["wf@1/check@1/check@4"].status == COMPLETED
    assert second.node_runs["wf@1/check@1/check@4"].output == "four"
    assert second.node_runs["wf@1/check@1/check@2"].status == WAITING
    assert second.node_runs["wf@1/check@1"].interrupt_ids == {"item-2"}
    assert calls == Counter({1: 1, 2: 1, 3: 1, 4: 2})

    done = await h.resume({"item-2": "two"})
    assert done.status == COMPLETED
    assert done.node_runs["wf@1/check@1"].output == [10, "two", 30, "four"]
    assert done.output == {"results": [10, "two", 30, "four"]}
    assert calls == Counter({1: 1, 2: 2, 3: 1, 4: 2})  # completed items never re-ran
    assert set(statuses(done).values()) == {COMPLETED}


@sync
async def test_parallel_worker_without_rerun_auto_completes_items(store_backend):
    @node(parallel_worker=True)
    def ask(node_input):
        return RequestInput(interrupt_id=f"q-{node_input}")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    await h.run(["x", "y"])
    await h.resume({"q-y": "Y"})
    done = await h.resume({"q-x": "X"})
    assert done.output == ["X", "Y"]


# --- Dynamic children with ctx.run_node ------------------------------------------------


@sync
async def test_dynamic_children_completed_child_not_reexecuted(store_backend):
    calls: Counter = Counter()

    @node
    def fetch(node_input):
        calls["fetch"] += 1
        return node_input * 2

    @node
    def confirm(node_input):
        calls["confirm"] += 1
        return RequestInput(interrupt_id="dyn-confirm", payload=node_input)

    @node(rerun_on_resume=True)
    async def orchestrate(ctx, node_input):
        calls["orchestrate"] += 1
        first = await ctx.run_node(fetch, node_input)
        second = await ctx.run_node(fetch, first)
        answer = await ctx.run_node(confirm, second)
        if answer is None:
            return None
        return {"fetched": [first, second], "answer": answer}

    h = Harness(Workflow(name="wf", edges=[("START", orchestrate)]), store_backend)
    first = await h.run(3)
    assert first.status == WAITING
    assert statuses(first) == {
        "wf@1": WAITING,
        "wf@1/orchestrate@1": WAITING,
        "wf@1/orchestrate@1/fetch@1": COMPLETED,
        "wf@1/orchestrate@1/fetch@2": COMPLETED,
        "wf@1/orchestrate@1/confirm@1": WAITING,
    }
    assert first.node_runs["wf@1/orchestrate@1"].interrupt_ids == {"dyn-confirm"}
    assert first.interrupts["dyn-confirm"].payload == 12
    assert interrupt_events(first) == [("wf@1/orchestrate@1/confirm@1", ["dyn-confirm"])]

    done = await h.resume({"dyn-confirm": "go"})
    assert done.status == COMPLETED
    assert done.output == {"fetched": [6, 12], "answer": "go"}
    assert calls == Counter(fetch=2, confirm=1, orchestrate=2)
    assert set(statuses(done).values()) == {COMPLETED}


@sync
async def test_run_node_without_rerun_on_resume_fails(store_backend):
    @node
    def child(node_input):
        return node_input

    @node
    async def orchestrate(ctx, node_input):
        return await ctx.run_node(child, node_input)

    h = Harness(Workflow(name="wf", edges=[("START", orchestrate)]), store_backend)
    result = await h.run(1)
    assert result.status == FAILED
    assert "rerun_on_resume=True" in result.error
    assert statuses(result) == {"wf@1": FAILED, "wf@1/orchestrate@1": FAILED}
    (error_event,) = [e for e in result.events if e.error]
    assert error_event.path == "wf@1/orchestrate@1"
