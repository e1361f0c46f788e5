"""Approval gates: a gated node asks before its body runs; approve runs it with the input,
edit with the edited args, reject completes it with a reason and the route "rejected"."""

from typing import Any

import pytest

from workflows.engine import (
    RequestInput,
    ResponseValidationError,
    RetryConfig,
    Workflow,
    approval_gate,
    node,
)

from .helpers import COMPLETED, FAILED, WAITING, Harness, statuses, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")

REFUND_ARGS = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": 0, "maximum": 1000},
        "customer": {"type": "string"},
    },
    "required": ["amount", "customer"],
    "additionalProperties": False,
}


def refund_workflow(
    calls: list[Any], *, allow_edit: bool = True, rerun: bool = False, **gate: Any
) -> Workflow:
    """START -> refund (gated) -> done; a rejection goes to revise, which proposes a
    smaller amount to the gate again."""

    @approval_gate(
        message="Refund {amount} to {customer}?",
        args_schema=REFUND_ARGS,
        assignees=["group:support"],
        allow_edit=allow_edit,
        **gate,
    )
    @node(name="refund", rerun_on_resume=rerun)
    def refund(node_input, ctx):
        calls.append(node_input)
        ctx.route = "refunded"
        return {"refunded": node_input["amount"], "to": node_input["customer"]}

    @node
    def revise(node_input):
        calls.append(("revise", node_input["reason"]))
        return {"amount": 10, "customer": "ann"}

    @node
    def done(node_input):
        return {"done": node_input}

    return Workflow(
        name="refunds",
        edges=[("START", refund, {"rejected": revise, "refunded": done}), (revise, refund)],
    )


def only_question(result):
    assert result.status == WAITING
    ((interrupt_id, request),) = result.interrupts.items()
    return interrupt_id, request


@sync
async def test_a_gated_node_asks_before_its_body_runs(store_backend):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls), store_backend)
    asked = await h.run({"amount": 50, "customer": "ann"})
    _, request = only_question(asked)
    assert calls == []
    assert request.message == "Refund 50 to ann?"
    assert request.payload == {"node": "refund", "args": {"amount": 50, "customer": "ann"}}
    assert request.assignees == ["group:support"]
    schema = request.response_schema
    assert schema["required"] == ["decision"]
    assert schema["properties"]["decision"]["enum"] == ["approve", "reject", "edit"]
    assert schema["properties"]["args"] == REFUND_ARGS
    assert statuses(asked)["refunds@1/refund@1"] == WAITING


@pytest.mark.parametrize("rerun", [False, True])
@sync
async def test_approve_runs_the_body_with_the_input_whatever_rerun_on_resume(rerun, store_backend):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls, rerun=rerun), store_backend)
    interrupt_id, _ = only_question(await h.run({"amount": 50, "customer": "ann"}))
    done = await h.resume({interrupt_id: {"decision": "approve"}})
    assert done.status == COMPLETED
    assert calls == [{"amount": 50, "customer": "ann"}]
    assert done.output == {"done": {"refunded": 50, "to": "ann"}}


@sync
async def test_edit_runs_the_body_with_the_edited_args(store_backend):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls), store_backend)
    interrupt_id, _ = only_question(await h.run({"amount": 50, "customer": "ann"}))
    edited = {"amount": 20, "customer": "ann"}
    done = await h.resume({interrupt_id: {"decision": "edit", "args": edited}})
    assert calls == [edited]
    assert done.output == {"done": {"refunded": 20, "to": "ann"}}
    # The proposal stays the node run's input; the edit is its answer.
    assert done.node_runs["refunds@1/refund@1"].input == {"amount": 50, "customer": "ann"}


@pytest.mark.parametrize(
    "answer",
    [
        {"decision": "edit", "args": {"amount": 5000, "customer": "ann"}},  # over the maximum
        {"decision": "edit", "args": {"amount": 5}},  # customer missing
        {"decision": "edit"},  # an edit without args
        {"decision": "maybe"},
        {"reason": "no decision"},
        {"decision": "approve", "remember": "always"},  # the gate remembers nothing
    ],
)
@sync
async def test_an_invalid_answer_is_refused_before_anything_is_stored(answer, store_backend):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls), store_backend)
    interrupt_id, _ = only_question(await h.run({"amount": 50, "customer": "ann"}))
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError):
        await h.resume({interrupt_id: answer})
    assert await h.snapshot() == before
    assert calls == []


@sync
async def test_an_edit_is_refused_when_the_gate_does_not_allow_edits(store_backend):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls, allow_edit=False), store_backend)
    interrupt_id, request = only_question(await h.run({"amount": 50, "customer": "ann"}))
    assert request.response_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as refused:
        await h.resume(
            {interrupt_id: {"decision": "edit", "args": {"amount": 1, "customer": "ann"}}}
        )
    assert {field for field, _ in refused.value.problems} >= {"decision"}
    assert await h.snapshot() == before
    assert calls == []


@pytest.mark.parametrize("rerun", [False, True])
@sync
async def test_reject_routes_the_reason_to_a_revising_step_which_proposes_again(
    rerun, store_backend
):
    calls: list[Any] = []
    h = Harness(refund_workflow(calls, rerun=rerun), store_backend)
    first_id, _ = only_question(await h.run({"amount": 900, "customer": "ann"}))
    revised = await h.resume({first_id: {"decision": "reject", "reason": "too much"}})
    rejected = revised.node_runs["refunds@1/refund@1"]
    assert rejected.status == COMPLETED
    assert rejected.output == {"rejected": True, "reason": "too much"}
    assert rejected.route == "rejected"
    assert calls == [("revise", "too much")]  # the body never ran
    second_id, second = only_question(revised)
    assert second_id != first_id
    assert second.payload == {"node": "refund", "args": {"amount": 10, "customer": "ann"}}
    assert second.message == "Refund 10 to ann?"
    done = await h.resume({second_id: {"decision": "approve"}})
    assert done.output == {"done": {"refunded": 10, "to": "ann"}}


@sync
async def test_a_rejection_without_a_reason_has_an_empty_reason(store_backend):
    h = Harness(refund_workflow([]), store_backend)
    interrupt_id, _ = only_question(await h.run({"amount": 900, "customer": "ann"}))
    revised = await h.resume({interrupt_id: {"decision": "reject"}})
    assert revised.node_runs["refunds@1/refund@1"].output == {"rejected": True, "reason": ""}


@sync
async def test_a_body_that_asks_after_its_gate_keeps_its_own_rerun_policy(store_backend):
    """A leaf (rerun_on_resume=False) whose body asks after approval auto-completes with
    that answer, as any leaf does; the gate's answer is not part of its output."""
    ran: list[Any] = []

    @approval_gate(message="Send?")
    @node(name="send")
    def send(node_input, ctx):
        ran.append(dict(ctx.resume_inputs))
        return RequestInput(interrupt_id="confirm", message="Which address?")

    h = Harness(Workflow(name="wf", edges=[("START", send)]), store_backend)
    gate_id, _ = only_question(await h.run({"to": "ann"}))
    asked = await h.resume({gate_id: {"decision": "approve"}})
    assert ran == [{}]  # the body does not see the gate's answer as its own
    assert set(asked.interrupts) == {"confirm"}
    done = await h.resume({"confirm": "ann@example.com"})
    assert done.status == COMPLETED
    assert done.output == "ann@example.com"
    assert len(ran) == 1


@sync
async def test_a_retried_gated_node_does_not_ask_again(store_backend):
    attempts: list[Any] = []

    @approval_gate(message="Delete {record}?")
    @node(name="delete")
    def delete(node_input):
        attempts.append(node_input)
        if len(attempts) == 1:
            raise RuntimeError("database unavailable")
        return {"deleted": node_input["record"]}

    h = Harness(Workflow(name="wf", edges=[("START", delete)]), store_backend)
    gate_id, _ = only_question(await h.run({"record": 7}))
    failed = await h.resume({gate_id: {"decision": "approve"}})
    assert failed.status == FAILED
    done = await h.retry(failed.invocation_id)
    assert done.status == COMPLETED
    assert done.output == {"deleted": 7}
    assert done.interrupts == {}


@sync
async def test_retry_config_re_runs_the_body_not_the_question(store_backend):
    attempts: list[Any] = []

    @approval_gate(message="Go?")
    @node(name="flaky", retry=RetryConfig(max_attempts=2, backoff=0))
    def flaky(node_input):
        attempts.append(node_input)
        if len(attempts) == 1:
            raise RuntimeError("once")
        return "ok"

    h = Harness(Workflow(name="wf", edges=[("START", flaky)]), store_backend)
    gate_id, _ = only_question(await h.run(1))
    done = await h.resume({gate_id: {"decision": "approve"}})
    assert done.status == COMPLETED
    assert done.output == "ok"
    assert attempts == [1, 1]


@sync
async def test_each_item_of_a_gated_parallel_worker_asks(store_backend):
    @approval_gate(message="Refund {amount}?")
    @node(name="refund", parallel_worker=True)
    def refund(node_input):
        return node_input["amount"]

    h = Harness(Workflow(name="wf", edges=[("START", refund)]), store_backend)
    asked = await h.run([{"amount": 1}, {"amount": 2}])
    assert sorted(r.message for r in asked.interrupts.values()) == ["Refund 1?", "Refund 2?"]
    answers = {
        i: {"decision": "reject" if r.payload["args"]["amount"] == 2 else "approve"}
        for i, r in asked.interrupts.items()
    }
    done = await h.resume(answers)
    assert done.output == [1, {"rejected": True, "reason": ""}]


@sync
async def test_a_message_the_args_cannot_fill_fails_the_node_clearly(store_backend):
    @approval_gate(message="Refund {amount}?")
    @node(name="refund")
    def refund(node_input):
        return node_input

    h = Harness(Workflow(name="wf", edges=[("START", refund)]), store_backend)
    failed = await h.run({"sum": 3})
    assert failed.status == FAILED
    assert "message 'Refund {amount}?' cannot be filled" in failed.error
