"""Rewind (DESIGN 3.8): change an answer already given; only what depended on it runs
again, on every store (conftest.py: store_backend)."""

from typing import Any

import pytest

from workflows.engine import JoinNode, RequestInput, Workflow, node
from workflows.engine.errors import (
    DecisionRequiredError,
    EffectsWouldRepeatError,
    InterruptSupersededError,
    NotRewindableError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.nodes import ParallelWorker
from workflows.engine.status import InterruptStatus, NodeStatus

from .helpers import COMPLETED, WAITING, Harness, statuses, sync

pytestmark = pytest.mark.usefixtures("store_backend")

SUPERSEDED = NodeStatus.SUPERSEDED
AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


def counted(calls: dict[str, int], name: str, **options: Any):
    """A node that counts its executions and passes its input on."""

    @node(name=name, **options)
    def body(node_input):
        calls[name] = calls.get(name, 0) + 1
        return {name: node_input}

    return body


def ask_node(calls: dict[str, int], name: str = "ask", interrupt_id: str = "q", **options: Any):
    @node(name=name, **options)
    def ask(ctx, node_input):
        calls[name] = calls.get(name, 0) + 1
        if interrupt_id not in ctx.resume_inputs:
            yield RequestInput(
                interrupt_id=interrupt_id, message="how much?", response_schema=AMOUNT
            )
            return
        yield ctx.resume_inputs[interrupt_id]

    return ask


def chain(calls: dict[str, int]) -> Workflow:
    """START -> before -> ask -> after -> last"""
    return Workflow(
        name="chain",
        edges=[
            (
                "START",
                counted(calls, "before"),
                ask_node(calls),
                counted(calls, "after"),
                counted(calls, "last"),
            )
        ],
    )


@sync
async def test_a_chain_reruns_only_what_followed_the_answer(store_backend):
    calls: dict[str, int] = {}
    h = Harness(chain(calls), store_backend)
    first = await h.run("x")
    done = await h.resume({"q": {"amount": 5}})
    assert done.status == COMPLETED
    assert done.output == {"last": {"after": {"amount": 5}}}
    assert calls == {"before": 1, "ask": 1, "after": 1, "last": 1}

    plan = await h.runner.plan_rewind("q")
    assert plan.reopened == ["chain@1/ask@1", "chain@1"]
    assert plan.superseded == ["chain@1/after@1", "chain@1/last@1"]
    assert plan.questions == [] and plan.effects == []

    again = await h.rewind("q", {"amount": 7})
    assert again.invocation_id == first.invocation_id
    assert again.status == COMPLETED
    assert again.output == {"last": {"after": {"amount": 7}}}
    # before never ran again; ask auto-completed from the new answer; after and last ran anew.
    assert calls == {"before": 1, "ask": 1, "after": 2, "last": 2}
    runs = statuses(again)
    assert runs["chain@1/before@1"] == COMPLETED
    assert runs["chain@1/ask@1"] == COMPLETED
    assert runs["chain@1/after@1"] == SUPERSEDED and runs["chain@1/last@1"] == SUPERSEDED
    assert runs["chain@1/after@2"] == COMPLETED and runs["chain@1/last@2"] == COMPLETED
    assert again.node_runs["chain@1/after@2"].triggered_by == "chain@1/ask@1"
    rewound = [e for e in again.events if e.rewound]
    assert len(rewound) == 1
    replaced = again.events[rewound[0].replaces]
    assert replaced.function_responses[0].id == "q"
    assert replaced.function_responses[0].response == {"amount": 5}
    assert rewound[0].function_responses[0].response == {"amount": 7}
    assert [e.path for e in again.events if e.status == SUPERSEDED] == [
        "chain@1/after@1",
        "chain@1/last@1",
    ]
    assert (await h.interrupt("q")).response == {"amount": 7}


@sync
async def test_the_same_answer_changes_nothing(store_backend):
    calls: dict[str, int] = {}
    h = Harness(chain(calls), store_backend)
    await h.run("x")
    await h.resume({"q": {"amount": 5}})
    before = await h.snapshot()
    same = await h.rewind("q", {"result": {"amount": 5}})
    assert same.status == COMPLETED
    assert await h.snapshot() == before
    assert calls["after"] == 1


@sync
async def test_refusals_name_the_reason_and_store_nothing(store_backend):
    calls: dict[str, int] = {}
    h = Harness(chain(calls), store_backend)
    first = await h.run("x")
    with pytest.raises(NotRewindableError) as pending:
        await h.runner.rewind("q", {"amount": 1})
    assert pending.value.reason == "pending" and pending.value.code == "not_rewindable"
    await h.resume({"q": {"amount": 5}})
    before = await h.snapshot()
    with pytest.raises(UnknownInterruptError):
        await h.runner.rewind("nope", {"amount": 1})
    with pytest.raises(ResponseValidationError) as invalid:
        await h.runner.rewind("q", {"amount": "7"})  # never coerced
    assert invalid.value.field == "amount"
    other = Harness(
        Workflow(name="other", edges=[("START", counted({}, "x"))]), store_backend, h.store
    )
    with pytest.raises(UnknownInterruptError):
        await other.runner.rewind("q", {"amount": 1})
    assert await h.snapshot() == before
    # Another execution holds the invocation: refused with "running", nothing stored.
    assert await h.store.acquire_lease(first.invocation_id, "someone else", 60) is not None
    before = await h.snapshot()
    with pytest.raises(NotRewindableError) as running:
        await h.runner.rewind("q", {"amount": 6})
    assert running.value.reason == "running"
    assert await h.snapshot() == before


@sync
async def test_a_cancelled_invocation_is_not_rewindable(store_backend):
    calls: dict[str, int] = {}

    @node(name="two")
    def two(ctx, node_input):
        if "second" not in ctx.resume_inputs:
            yield RequestInput(interrupt_id="second", message="and?")
            return
        yield "done"

    wf = Workflow(name="cancelled", edges=[("START", ask_node(calls), two)])
    h = Harness(wf, store_backend)
    first = await h.run("x")
    await h.resume({"q": {"amount": 5}})
    await h.cancel(first.invocation_id)
    before = await h.snapshot()
    with pytest.raises(NotRewindableError) as refused:
        await h.runner.rewind("q", {"amount": 3})
    assert refused.value.reason == "cancelled"
    assert await h.snapshot() == before


@sync
async def test_branches_keep_what_did_not_depend_and_a_join_keeps_its_other_input(store_backend):
    """START -> split -> (ask -> priced) and (side) -> both (join) -> end"""
    calls: dict[str, int] = {}
    both = JoinNode(name="both")
    wf = Workflow(
        name="branches",
        edges=[
            ("START", counted(calls, "split"), ask_node(calls), counted(calls, "priced"), both),
            ("split", counted(calls, "side"), both),
            (both, counted(calls, "end")),
        ],
    )
    h = Harness(wf, store_backend)
    await h.run("x")
    done = await h.resume({"q": {"amount": 1}})
    assert done.status == COMPLETED
    again = await h.rewind("q", {"amount": 2})
    assert again.status == COMPLETED
    assert calls == {"split": 1, "ask": 1, "priced": 2, "side": 1, "end": 2}
    runs = statuses(again)
    assert runs["branches@1/side@1"] == COMPLETED
    assert runs["branches@1/both@1"] == SUPERSEDED
    assert runs["branches@1/both@2"] == COMPLETED
    assert again.node_runs["branches@1/both@2"].input == {
        "priced": {"priced": {"amount": 2}},
        "side": {"side": {"split": "x"}},
    }
    assert again.output == {"end": again.node_runs["branches@1/both@2"].input}


@sync
async def test_a_nested_answer_reopens_every_ancestor_and_supersedes_at_each_level(store_backend):
    calls: dict[str, int] = {}
    inner = Workflow(name="inner", edges=[("START", ask_node(calls), counted(calls, "in_after"))])
    wf = Workflow(
        name="outer",
        edges=[("START", counted(calls, "first"), inner, counted(calls, "out_after"))],
    )
    h = Harness(wf, store_backend)
    await h.run("x")
    await h.resume({"q": {"amount": 1}})
    plan = await h.runner.plan_rewind("q")
    assert plan.reopened == ["outer@1/inner@1/ask@1", "outer@1/inner@1", "outer@1"]
    assert plan.superseded == ["outer@1/inner@1/in_after@1", "outer@1/out_after@1"]
    again = await h.rewind("q", {"amount": 9})
    assert again.status == COMPLETED
    assert calls == {"first": 1, "ask": 1, "in_after": 2, "out_after": 2}
    assert again.output == {"out_after": {"in_after": {"amount": 9}}}


@sync
async def test_a_dynamic_parent_supersedes_the_children_it_made_after(store_backend):
    calls: dict[str, int] = {}
    asker = ask_node(calls)
    step = counted(calls, "step")

    @node(name="driver", rerun_on_resume=True)
    async def driver(ctx, node_input):
        calls["driver"] = calls.get("driver", 0) + 1
        before = await ctx.run_node(step, "before")
        answer = await ctx.run_node(asker, node_input)
        if answer is None:
            return
        after = await ctx.run_node(step, answer)
        yield {"before": before, "after": after}

    h = Harness(Workflow(name="dyn", edges=[("START", driver)]), store_backend)
    await h.run("x")
    await h.resume({"q": {"amount": 1}})
    plan = await h.runner.plan_rewind("q")
    assert plan.superseded == ["dyn@1/driver@1/step@2"]
    again = await h.rewind("q", {"amount": 4})
    assert again.status == COMPLETED
    assert again.output == {"before": {"step": "before"}, "after": {"step": {"amount": 4}}}
    assert calls["step"] == 3  # before once, after twice
    assert statuses(again)["dyn@1/driver@1/step@2"] == SUPERSEDED
    assert statuses(again)["dyn@1/driver@1/step@3"] == COMPLETED


@sync
async def test_a_parallel_worker_reopens_only_the_rewound_item(store_backend):
    calls: dict[str, int] = {}

    @node(name="item")
    def item(ctx, node_input):
        calls[node_input] = calls.get(node_input, 0) + 1
        interrupt_id = f"q-{node_input}"
        if interrupt_id not in ctx.resume_inputs:
            yield RequestInput(interrupt_id=interrupt_id, message=node_input)
            return
        yield {node_input: ctx.resume_inputs[interrupt_id]}

    worker = ParallelWorker(item)
    wf = Workflow(name="par", edges=[("START", worker, counted(calls, "after"))])
    h = Harness(wf, store_backend)
    await h.run(["a", "b"])
    done = await h.resume({"q-a": 1, "q-b": 2})
    assert done.status == COMPLETED
    plan = await h.runner.plan_rewind("q-a")
    assert plan.reopened == ["par@1/item@1/item@1", "par@1/item@1", "par@1"]
    assert plan.superseded == ["par@1/after@1"]
    again = await h.rewind("q-a", 10)
    assert again.status == COMPLETED
    assert again.output == {"after": [10, 2]}
    assert calls == {"a": 1, "b": 1, "after": 2}


@sync
async def test_a_rerun_anchor_asks_again_and_its_later_questions_are_superseded(store_backend):
    calls: dict[str, int] = {}

    @node(name="interview", rerun_on_resume=True)
    def interview(ctx, node_input):
        calls["interview"] = calls.get("interview", 0) + 1
        if "first" not in ctx.resume_inputs:
            yield RequestInput(interrupt_id="first", message="first?")
            return
        if ctx.resume_inputs["first"] == "more" and "second" not in ctx.resume_inputs:
            yield RequestInput(interrupt_id="second", message="second?")
            return
        yield dict(ctx.resume_inputs)

    h = Harness(Workflow(name="talk", edges=[("START", interview)]), store_backend)
    await h.run()
    waiting = await h.resume({"first": "more"})
    assert set(waiting.interrupts) == {"second"}
    done = await h.resume({"second": "b"})
    assert done.output == {"first": "more", "second": "b"}
    plan = await h.runner.plan_rewind("first")
    assert plan.questions == ["second"]
    again = await h.rewind("first", "enough")
    assert again.status == COMPLETED
    assert again.output == {"first": "enough"}
    assert (await h.interrupt("second")).status == InterruptStatus.SUPERSEDED
    with pytest.raises(InterruptSupersededError) as refused:
        await h.resume({"second": "b"})
    assert refused.value.code == "interrupt_superseded"
    # Asked again under the same id: the same question, pending, a new round.
    back = await h.rewind("first", "more")
    assert back.status == WAITING and set(back.interrupts) == {"second"}
    second = await h.interrupt("second")
    assert second.status == InterruptStatus.PENDING and second.round == 2
    finished = await h.resume({"second": "c"})
    assert finished.output == {"first": "more", "second": "c"}


@sync
async def test_a_superseded_question_of_a_downstream_run_is_asked_again(store_backend):
    calls: dict[str, int] = {}
    wf = Workflow(
        name="two_questions",
        edges=[("START", ask_node(calls), ask_node(calls, "review", "r"))],
    )
    h = Harness(wf, store_backend)
    await h.run()
    await h.resume({"q": {"amount": 1}})
    await h.resume({"r": {"amount": 2}})
    again = await h.rewind("q", {"amount": 3})
    assert again.status == WAITING and set(again.interrupts) == {"r"}
    review = await h.interrupt("r")
    assert review.status == InterruptStatus.PENDING and review.round == 2
    assert review.path == "two_questions@1/review@2"


@sync
async def test_effects_inside_the_slice_must_be_confirmed(store_backend):
    calls: dict[str, int] = {}
    sent: list[str] = []

    @node(name="pay")
    async def pay(ctx, node_input):
        def transfer(idempotency_key):
            sent.append(idempotency_key)
            return "paid"

        yield await ctx.effect("transfer", transfer)

    wf = Workflow(name="payout", edges=[("START", ask_node(calls), pay)])
    h = Harness(wf, store_backend)
    first = await h.run()
    await h.resume({"q": {"amount": 1}})
    before = await h.snapshot()
    with pytest.raises(EffectsWouldRepeatError) as refused:
        await h.runner.rewind("q", {"amount": 2})
    assert [(e["path"], e["name"], e["in_doubt"]) for e in refused.value.effects] == [
        ("payout@1/pay@1", "transfer", False)
    ]
    with pytest.raises(EffectsWouldRepeatError):
        await h.runner.rewind("q", {"amount": 2}, confirm_effects=[("elsewhere@1", "transfer")])
    assert await h.snapshot() == before
    again = await h.rewind("q", {"amount": 2}, confirm_effects=[("payout@1/pay@1", "transfer")])
    assert again.status == COMPLETED
    inv = first.invocation_id
    assert sent == [f"{inv}:payout@1/pay@1:transfer", f"{inv}:payout@1/pay@2:transfer"]


@sync
async def test_a_rerun_anchors_confirmed_effect_runs_under_a_rewind_key(store_backend):
    sent: list[str] = []

    @node(name="decide_and_pay", rerun_on_resume=True)
    async def decide_and_pay(ctx, node_input):
        if "q" not in ctx.resume_inputs:
            yield RequestInput(interrupt_id="q", message="pay?")
            return

        def transfer(idempotency_key):
            sent.append(idempotency_key)
            return ctx.resume_inputs["q"]

        yield await ctx.effect("transfer", transfer)

    h = Harness(Workflow(name="anchor_effect", edges=[("START", decide_and_pay)]), store_backend)
    first = await h.run()
    await h.resume({"q": 1})
    again = await h.rewind("q", 2, confirm_effects=True)
    assert again.output == 2
    third = await h.rewind("q", 3, confirm_effects=True)
    assert third.output == 3
    key = f"{first.invocation_id}:anchor_effect@1/decide_and_pay@1:transfer"
    assert sent == [key, f"{key}:rewind-1", f"{key}:rewind-2"]


@sync
async def test_a_failed_invocation_is_rewound_and_its_failed_runs_driven_again(store_backend):
    calls: dict[str, int] = {}

    @node(name="fragile")
    def fragile(node_input):
        calls["fragile"] = calls.get("fragile", 0) + 1
        if node_input["amount"] < 0:
            raise ValueError("negative")
        return node_input

    wf = Workflow(name="fails", edges=[("START", ask_node(calls), fragile)])
    h = Harness(wf, store_backend)
    await h.run()
    failed = await h.resume({"q": {"amount": -1}})
    assert failed.status == NodeStatus.FAILED
    again = await h.rewind("q", {"amount": 3})
    assert again.status == COMPLETED and again.output == {"amount": 3}
    assert statuses(again)["fails@1/fragile@1"] == SUPERSEDED


@sync
async def test_a_loop_rewound_in_an_early_round_supersedes_the_later_rounds(store_backend):
    calls: dict[str, int] = {}

    @node(name="count", rerun_on_resume=False)
    def count(node_input):
        calls["count"] = calls.get("count", 0) + 1
        n = (node_input or {}).get("n", 0) + 1 if isinstance(node_input, dict) else 1
        return Event_route(n)

    def Event_route(n):
        from workflows.engine import Event

        return Event(output={"n": n}, route="again" if n < 3 else "done")

    wf = Workflow(
        name="loop",
        edges=[
            ("START", ask_node(calls), count),
            (count, {"again": count, "done": counted(calls, "finish")}),
        ],
    )
    h = Harness(wf, store_backend)
    await h.run()
    done = await h.resume({"q": {"amount": 1}})
    assert done.status == COMPLETED and calls["count"] == 3
    plan = await h.runner.plan_rewind("q")
    assert plan.superseded == [
        "loop@1/count@1",
        "loop@1/count@2",
        "loop@1/count@3",
        "loop@1/finish@1",
    ]
    again = await h.rewind("q", {"amount": 2})
    assert again.status == COMPLETED and calls["count"] == 6
    assert statuses(again)["loop@1/count@6"] == COMPLETED


@sync
async def test_a_quorum_question_is_refused_here(store_backend):
    @node(name="vote")
    def vote(ctx, node_input):
        if "v" not in ctx.resume_inputs:
            yield RequestInput(
                interrupt_id="v",
                assignees=["user:a", "user:b"],
                quorum=2,
                response_schema={"type": "object", "properties": {"approved": {"type": "boolean"}}},
            )
            return
        yield ctx.resume_inputs["v"]

    h = Harness(Workflow(name="quorum", edges=[("START", vote)]), store_backend)
    await h.run()
    await h.resume({"v": {"approved": True}})
    with pytest.raises(DecisionRequiredError):
        await h.runner.rewind("v", {"approved": False})


@sync
async def test_a_rewound_gate_decides_again_and_its_grant_is_revoked(store_backend):
    from workflows.engine import approval_gate

    paid: list[Any] = []

    @approval_gate(
        message="Pay {amount}?",
        args_schema={"type": "object", "properties": {"amount": {"type": "number"}}},
        remember=("invocation",),
    )
    @node(name="pay")
    def pay(node_input):
        paid.append(node_input["amount"])
        return {"paid": node_input["amount"]}

    h = Harness(Workflow(name="gate_rewind", edges=[("START", pay)]), store_backend)
    asked = await h.run({"amount": 5})
    ((question, _),) = asked.interrupts.items()
    await h.resume({question: {"decision": "approve", "remember": "invocation"}})
    assert paid == [5]
    grants = await store_backend.grants(h.store)
    assert [g.revoked_at for g in grants.values()] == [None]
    plan = await h.runner.plan_rewind(question)
    assert plan.reopened == ["gate_rewind@1/pay@1", "gate_rewind@1"]
    rejected = await h.rewind(question, {"decision": "reject", "reason": "wrong amount"})
    assert rejected.status == COMPLETED
    assert paid == [5]  # the body does not run again on a rejection
    assert rejected.node_runs["gate_rewind@1/pay@1"].gate["decision"] == "reject"
    grants = await store_backend.grants(h.store)
    assert all(g.revoked_at is not None for g in grants.values())
