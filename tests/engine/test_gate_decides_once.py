"""A gate decides once per node run (DESIGN 4.4): its outcome is stored with the run and a
re-execution (a crash, a retry, a resume) reuses it, never asking again nor consulting a
grant again; a grant's use is counted once per gated dispatch; args reach the body only
after args_schema accepted them (formats checked) on every path; the body sees what was
decided (`ctx.gate`); an in-doubt question inherits the gate's rules."""

from datetime import UTC, datetime
from typing import Any

import pytest

from workflows.engine import (
    GrantRecord,
    GrantScope,
    ResponseValidationError,
    RetryConfig,
    Runner,
    Workflow,
    approval_gate,
    node,
)
from workflows.engine.questions import is_effect_question, is_gate_question

from .helpers import COMPLETED, WAITING, Harness, sync

pytestmark = pytest.mark.usefixtures("store_backend")

INVOCATION = "7c1d3e5f-2a4b-4c6d-8e0f-1a2b3c4d5e6f"
REFUND_ARGS = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "customer": {"type": "string"}},
    "required": ["amount", "customer"],
}


class Crash(BaseException):
    """The process dying: nothing after it is committed."""


def always_grant(pins: dict[str, Any] | None = None, uses_left: int | None = None) -> GrantRecord:
    return GrantRecord(
        id="grant-1",
        workflow_name="refunds",
        node_name="refund",
        scope=GrantScope.ALWAYS,
        pins=pins,
        uses_left=uses_left,
        created_at=datetime.now(UTC),
    )


def refund_workflow(paid: list[Any], crash: dict[str, bool], **gate: Any) -> Workflow:
    """START -> refund (gated, remembered always): pays through `ctx.effect`; while
    crash["inside"] is set the process dies inside the payment, after the provider paid."""

    def provider(amount: Any, idempotency_key: str) -> dict[str, Any]:
        paid.append(amount)
        if crash["inside"]:
            crash["inside"] = False
            raise Crash()
        return {"paid": amount}

    @approval_gate(
        message="Refund {amount} EUR?", args_schema=REFUND_ARGS, remember=("always",), **gate
    )
    @node(name="refund")
    async def refund(node_input, ctx):
        return await ctx.effect("pay", provider, node_input["amount"])

    return Workflow(name="refunds", edges=[("START", refund)])


async def recover(h: Harness) -> Any:
    """Drive the invocation again, as a worker taking over a dead one's lease does."""
    return await h.check(await Runner(h.runner.workflow, store=h.store).drive(INVOCATION))


@sync
async def test_an_effect_passed_on_a_grant_is_followed_by_its_in_doubt_question_after_a_revoke(
    store_backend,
):
    """The refund passed on a grant, the provider paid, the worker died; the grant was
    revoked before recovery: the run asks whether the payment happened, never "Refund 20
    EUR?" again (whose rejection would record a refund that moved money as rejected)."""
    paid: list[Any] = []
    h = Harness(refund_workflow(paid, {"inside": True}), store_backend)
    await h.store.record_grant(always_grant())
    with pytest.raises(Crash):
        await h.runner.run({"amount": 20, "customer": "ann"}, invocation_id=INVOCATION)
    await h.store.revoke_grant("grant-1", datetime.now(UTC))
    asked = await recover(h)
    assert asked.status == WAITING
    ((question_id, request),) = asked.interrupts.items()
    assert not is_gate_question(question_id), "asked the gate's question again"
    assert is_effect_question(question_id) and request.payload["effect"] == "pay"
    done = await h.resume({question_id: {"happened": True, "result": {"paid": 20}}})
    assert (done.status, done.output) == (COMPLETED, {"paid": 20})
    assert paid == [20]
    assert len(await store_backend.grant_uses(h.store)) == 1


@sync
async def test_a_dispatch_uses_its_grant_once_through_retries_and_resumes(store_backend):
    """uses_left counts dispatches: a body retried twice, then asking whether its effect
    happened and resumed, takes one use and records one grant use."""
    paid: list[Any] = []
    failures = {"left": 2}

    def provider(amount: Any, idempotency_key: str) -> dict[str, Any]:
        paid.append(amount)
        raise Crash()

    @approval_gate(message="Refund {amount} EUR?", args_schema=REFUND_ARGS, remember=("always",))
    @node(name="refund", retry=RetryConfig(max_attempts=3, backoff=0.001))
    async def refund(node_input, ctx):
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("the provider is down")
        return await ctx.effect("pay", provider, node_input["amount"])

    h = Harness(Workflow(name="refunds", edges=[("START", refund)]), store_backend)
    await h.store.record_grant(always_grant(uses_left=3))
    with pytest.raises(Crash):
        await h.runner.run({"amount": 20, "customer": "ann"}, invocation_id=INVOCATION)
    asked = await recover(h)
    (question_id,) = asked.interrupts
    done = await h.resume({question_id: {"happened": True, "result": {"paid": 20}}})
    assert done.status == COMPLETED
    assert len(await store_backend.grant_uses(h.store)) == 1
    assert (await store_backend.grants(h.store))["grant-1"].uses_left == 2


@sync
async def test_an_approved_run_retried_is_not_asked_again(store_backend):
    attempts: list[Any] = []

    @approval_gate(message="Go?")
    @node(name="go", retry=RetryConfig(max_attempts=2, backoff=0.001))
    def go(node_input, ctx):
        attempts.append(dict(ctx.gate))
        if len(attempts) == 1:
            raise ConnectionError("flaky")
        return "went"

    h = Harness(Workflow(name="wf", edges=[("START", go)]), store_backend)
    asked = await h.run({"x": 1})
    (gate_id,) = asked.interrupts
    done = await h.resume({gate_id: {"decision": "approve", "reason": "fine"}})
    assert (done.status, done.output) == (COMPLETED, "went")
    assert attempts[0] == attempts[1]
    assert attempts[0]["decision"] == "approve" and attempts[0]["reason"] == "fine"


@sync
async def test_the_body_sees_what_was_decided_in_ctx_gate(store_backend):
    seen: list[Any] = []

    @approval_gate(message="Refund {amount}?", args_schema=REFUND_ARGS, allow_edit=True)
    @node(name="refund")
    def refund(node_input, ctx):
        seen.append(ctx.gate)
        return node_input

    h = Harness(Workflow(name="refunds", edges=[("START", refund)]), store_backend)
    asked = await h.run({"amount": 90, "customer": "ann"})
    (gate_id,) = asked.interrupts
    edit = {"amount": 40, "customer": "ann"}
    await h.resume({gate_id: {"decision": "edit", "args": edit, "reason": "too much"}})
    ((gate),) = seen
    assert {k: gate[k] for k in ("decision", "args", "original_args", "edited", "reason")} == {
        "decision": "edit",
        "args": edit,
        "original_args": {"amount": 90, "customer": "ann"},
        "edited": True,
        "reason": "too much",
    }
    assert "by" in gate


@sync
async def test_a_pin_is_never_satisfied_by_args_the_schema_refuses(store_backend):
    """A pin of maximum 100 and the amount "250000" (a string, which `maximum` ignores):
    the gate's args_schema refuses it, so no grant covers it and nobody may approve it:
    the proposal is rejected (route "rejected") and the body never runs."""
    paid: list[Any] = []
    h = Harness(refund_workflow(paid, {"inside": False}), store_backend)
    await h.store.record_grant(always_grant(pins={"properties": {"amount": {"maximum": 100}}}))
    done = await h.run({"amount": "250000", "customer": "ann"})
    assert done.status == COMPLETED
    assert done.output["rejected"] is True
    assert "args_schema" in done.output["reason"] and "amount" in done.output["reason"]
    assert paid == []
    assert await store_backend.grant_uses(h.store) == []
    within = await h.run({"amount": 80, "customer": "ann"})
    assert within.output == {"paid": 80}


@sync
async def test_an_edit_must_satisfy_the_schemas_formats(store_backend):
    mail_args = {
        "type": "object",
        "properties": {"to": {"type": "string", "format": "email"}},
        "required": ["to"],
    }

    @approval_gate(message="Mail {to}?", args_schema=mail_args, allow_edit=True)
    @node(name="mail")
    def mail(node_input):
        return node_input

    h = Harness(Workflow(name="mails", edges=[("START", mail)]), store_backend)
    asked = await h.run({"to": "ann@example.com"})
    (gate_id,) = asked.interrupts
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError) as refused:
        await h.resume({gate_id: {"decision": "edit", "args": {"to": "not an email"}}})
    assert refused.value.field == "args.to"
    assert await h.snapshot() == before
    done = await h.resume({gate_id: {"decision": "edit", "args": {"to": "bob@example.com"}}})
    assert done.output == {"to": "bob@example.com"}


@sync
async def test_args_come_with_an_edit_only(store_backend):
    ran: list[Any] = []

    @approval_gate(message="Refund {amount}?", args_schema=REFUND_ARGS, allow_edit=True)
    @node(name="refund")
    def refund(node_input):
        ran.append(node_input)
        return node_input

    h = Harness(Workflow(name="refunds", edges=[("START", refund)]), store_backend)
    asked = await h.run({"amount": 90, "customer": "ann"})
    (gate_id,) = asked.interrupts
    before = await h.snapshot()
    other = {"amount": 9000, "customer": "mallory"}
    with pytest.raises(ResponseValidationError):
        await h.resume({gate_id: {"decision": "approve", "args": other}})
    assert await h.snapshot() == before
    assert ran == []


@sync
async def test_an_in_doubt_question_inherits_the_gates_rules(store_backend):
    paid: list[Any] = []
    h = Harness(
        refund_workflow(
            paid,
            {"inside": True},
            assignees=["user:ann", "user:bob", "user:cy"],
            quorum=2,
            four_eyes=True,
            require_signature=True,
        ),
        store_backend,
    )
    await h.store.record_grant(always_grant())
    with pytest.raises(Crash):
        await h.runner.run({"amount": 20, "customer": "ann"}, invocation_id=INVOCATION)
    asked = await recover(h)
    ((question_id, request),) = asked.interrupts.items()
    assert is_effect_question(question_id)
    assert request.assignees == ["user:ann", "user:bob", "user:cy"]
    assert (request.quorum, request.four_eyes, request.require_signature) == (2, True, True)


def paying_node(result_schema: Any = None) -> Workflow:
    crash = {"inside": True}

    def provider(amount: Any) -> dict[str, Any]:
        if crash["inside"]:
            crash["inside"] = False
            raise Crash()
        return {"paid": amount}

    @node(name="pay")
    async def pay(node_input, ctx):
        result = await ctx.effect("pay", provider, node_input, result_schema=result_schema)
        return {"receipt": result}

    return Workflow(name="payments", edges=[("START", pay)])


@sync
async def test_result_schema_makes_an_in_doubt_answers_result_required_and_valid(store_backend):
    receipt = {
        "type": "object",
        "properties": {"paid": {"type": "number"}},
        "required": ["paid"],
    }
    h = Harness(paying_node(receipt), store_backend)
    with pytest.raises(Crash):
        await h.runner.run(5, invocation_id=INVOCATION)
    asked = await recover(h)
    (question_id,) = asked.interrupts
    before = await h.snapshot()
    for answer, field in (
        ({"happened": True}, "result"),
        ({"happened": True, "result": {"paid": "five"}}, "result.paid"),
    ):
        with pytest.raises(ResponseValidationError) as refused:
            await h.resume({question_id: answer})
        assert refused.value.field == field
        assert await h.snapshot() == before
    done = await h.resume({question_id: {"happened": True, "result": {"paid": 5}}})
    assert done.output == {"receipt": {"paid": 5}}


@sync
async def test_it_happened_without_a_result_returns_none_without_a_result_schema(store_backend):
    h = Harness(paying_node(), store_backend)
    with pytest.raises(Crash):
        await h.runner.run(5, invocation_id=INVOCATION)
    asked = await recover(h)
    (question_id,) = asked.interrupts
    done = await h.resume({question_id: {"happened": True}})
    assert (done.status, done.output) == (COMPLETED, {"receipt": None})


@sync
async def test_an_effect_seen_finished_is_never_asked_about(store_backend):
    """The finish is committed before ctx.effect returns: a crash right after it finds the
    effect finished (its result reused, no question, no second call)."""
    calls: list[Any] = []
    crash = {"after": True}

    @node(name="pay")
    async def pay(node_input, ctx):
        result = await ctx.effect("pay", lambda amount: calls.append(amount) or amount, node_input)
        if crash["after"]:
            crash["after"] = False
            raise Crash()
        return result

    h = Harness(Workflow(name="payments", edges=[("START", pay)]), store_backend)
    with pytest.raises(Crash):
        await h.runner.run(7, invocation_id=INVOCATION)
    done = await recover(h)
    assert (done.status, done.output) == (COMPLETED, 7)
    assert calls == [7]


class RevokedMeanwhile:
    """A store on which the grant a gate finds is revoked before the gate's commit; it
    notes the gate outcome of every node run it commits."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.committed_gates: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def find_grants(self, *args: Any) -> Any:
        found = await self.inner.find_grants(*args)
        await self.inner.revoke_grant("grant-1", datetime.now(UTC))
        return found

    async def commit(self, batch: Any) -> Any:
        result = await self.inner.commit(batch)
        self.committed_gates += [
            state.gate for path, state in batch.node_runs.items() if path.endswith("refund@1")
        ]
        return result


@sync
async def test_a_grant_refused_at_commit_leaves_the_gate_undecided_and_it_asks(store_backend):
    paid: list[Any] = []
    store = RevokedMeanwhile(store_backend.new_store())
    h = Harness(refund_workflow(paid, {"inside": False}), store_backend, store=store)
    await store.record_grant(always_grant())
    asked = await h.run({"amount": 20, "customer": "ann"})
    ((question_id, _),) = asked.interrupts.items()
    assert is_gate_question(question_id)
    assert all(gate is None for gate in store.committed_gates), store.committed_gates
    assert await store_backend.grant_uses(store.inner) == []
    done = await h.resume({question_id: {"decision": "approve"}})
    assert done.output == {"paid": 20}
    assert store.committed_gates[-1]["decision"] == "approve"
    assert store.committed_gates[-1].get("grant") is None
