"""Effects: `ctx.effect` / `ctx.effect_sync` record started and finished durably around the
call (the finish committed before it returns); a re-execution reuses a finished effect's
result; an effect in doubt (started, never finished: the process died inside the call) is
called again with the same key when idempotent, otherwise the node asks."""

from typing import Any

import pytest

from workflows.engine import (
    EffectStatus,
    RequestInput,
    Runner,
    Workflow,
    approval_gate,
    node,
)

from .helpers import COMPLETED, FAILED, WAITING, CountingStore, Harness, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")

INVOCATION = "5f0e2b8c-9d1a-4c3e-8b7f-2a6d4e1c9b03"


class Crash(BaseException):
    """The process dying: nothing after it is committed."""


def charge(calls: list[Any], crash: dict[str, bool] | None = None):
    """The provider's charge; while crash["after"] is set, the process dies once the
    provider charged, before the call returns (so before its result is recorded)."""

    def charge(amount: int, *, idempotency_key: str) -> dict[str, Any]:
        calls.append((amount, idempotency_key))
        if crash is not None and crash["after"]:
            crash["after"] = False
            raise Crash()
        return {"charged": amount, "receipt": f"r-{len(calls)}"}

    return charge


def paying_workflow(
    calls: list[Any], crash: dict[str, bool], *, idempotent: bool, rerun: bool = False
) -> Workflow:
    """START -> pay: charges its input through `ctx.effect`; while crash["after"] is set,
    the process dies inside the charge, after the provider charged."""

    @node(name="pay", rerun_on_resume=rerun)
    async def pay(node_input, ctx):
        return await ctx.effect("charge", charge(calls, crash), node_input, idempotent=idempotent)

    return Workflow(name="payments", edges=[("START", pay)])


async def crash_then_recover(h: Harness, node_input: Any) -> Any:
    """Run until the crash, then recover as a restarted worker does (`drive`)."""
    with pytest.raises(Crash):
        await h.runner.run(node_input, invocation_id=INVOCATION)
    return await h.check(await Runner(h.runner.workflow, store=h.store).drive(INVOCATION))


async def effect_records(h: Harness, invocation_id: str, path: str) -> dict[str, Any]:
    return await h.store.load_effects(invocation_id, path)


@sync
async def test_an_effect_runs_once_with_a_key_derived_from_the_node_run(store_backend):
    calls: list[Any] = []
    h = Harness(paying_workflow(calls, {"after": False}, idempotent=False), store_backend)
    done = await h.run(30)
    assert done.status == COMPLETED
    assert done.output == {"charged": 30, "receipt": "r-1"}
    assert calls == [(30, f"{done.invocation_id}:payments@1/pay@1:charge")]
    (record,) = (await effect_records(h, done.invocation_id, "payments@1/pay@1")).values()
    assert record.status == EffectStatus.FINISHED
    assert record.result == {"charged": 30, "receipt": "r-1"}
    assert record.key == f"{done.invocation_id}:payments@1/pay@1:charge"


@sync
async def test_a_re_executed_node_reuses_a_finished_effect_without_calling_it(store_backend):
    calls: list[Any] = []

    @node(name="pay", rerun_on_resume=True)
    async def pay(node_input, ctx):
        charged = await ctx.effect("charge", charge(calls), node_input)
        if "ok" not in ctx.resume_inputs:
            return RequestInput(interrupt_id="ok", message="Tell the customer?")
        return {"charged": charged, "told": ctx.resume_inputs["ok"]}

    h = Harness(Workflow(name="wf", edges=[("START", pay)]), store_backend)
    waiting = await h.run(5)
    assert waiting.status == WAITING
    done = await h.resume({"ok": True})
    assert done.status == COMPLETED
    assert done.output == {"charged": {"charged": 5, "receipt": "r-1"}, "told": True}
    assert len(calls) == 1


@sync
async def test_an_idempotent_effect_in_doubt_is_called_again_with_the_same_key(store_backend):
    calls: list[Any] = []
    h = Harness(paying_workflow(calls, {"after": True}, idempotent=True), store_backend)
    done = await crash_then_recover(h, 30)
    assert done.status == COMPLETED
    assert [amount for amount, _ in calls] == [30, 30]
    assert calls[0][1] == calls[1][1] == f"{INVOCATION}:payments@1/pay@1:charge"
    (record,) = (await effect_records(h, INVOCATION, "payments@1/pay@1")).values()
    assert (record.status, record.attempts) == (EffectStatus.FINISHED, 2)


@pytest.mark.parametrize("rerun", [False, True])
@sync
async def test_a_non_idempotent_effect_in_doubt_asks_and_a_yes_is_not_repeated(
    rerun, store_backend
):
    calls: list[Any] = []
    h = Harness(
        paying_workflow(calls, {"after": True}, idempotent=False, rerun=rerun), store_backend
    )
    asked = await crash_then_recover(h, 30)
    assert asked.status == WAITING
    assert len(calls) == 1  # not repeated
    ((question_id, request),) = asked.interrupts.items()
    assert request.payload["effect"] == "charge"
    assert request.payload["idempotency_key"] == f"{INVOCATION}:payments@1/pay@1:charge"
    assert request.response_schema["required"] == ["happened"]
    (record,) = (await effect_records(h, INVOCATION, "payments@1/pay@1")).values()
    assert record.status == EffectStatus.IN_DOUBT
    happened = {"charged": 30, "receipt": "from the bank's site"}
    done = await h.resume({question_id: {"happened": True, "result": happened}})
    assert done.status == COMPLETED
    assert done.output == happened
    assert len(calls) == 1


@sync
async def test_a_no_performs_the_effect_now_with_the_same_key(store_backend):
    calls: list[Any] = []
    h = Harness(paying_workflow(calls, {"after": True}, idempotent=False), store_backend)
    asked = await crash_then_recover(h, 30)
    (question_id,) = asked.interrupts
    done = await h.resume({question_id: {"happened": False}})
    assert done.status == COMPLETED
    assert done.output == {"charged": 30, "receipt": "r-2"}
    assert calls[0][1] == calls[1][1]


@sync
async def test_an_effect_in_doubt_again_after_a_no_is_asked_about_anew(store_backend):
    calls: list[Any] = []
    crash = {"after": True}
    h = Harness(paying_workflow(calls, crash, idempotent=False), store_backend)
    asked = await crash_then_recover(h, 30)
    (first_question,) = asked.interrupts
    crash["after"] = True  # dies again after the call the "no" allowed
    with pytest.raises(Crash):
        await h.runner.resume([_answer(first_question, {"happened": False})])
    again = await h.check(await Runner(h.runner.workflow, store=h.store).drive(INVOCATION))
    (second_question,) = again.interrupts
    assert second_question != first_question
    assert len(calls) == 2


def _answer(interrupt_id: str, response: Any) -> Any:
    from workflows.engine import FunctionResponse

    return FunctionResponse(interrupt_id, "answer", response)


@sync
async def test_a_gated_nodes_question_in_doubt_goes_to_the_gates_assignees(store_backend):
    calls: list[Any] = []
    crash = {"after": False}

    @approval_gate(message="Charge {amount}?", assignees=["group:billing"])
    @node(name="pay")
    async def pay(node_input, ctx):
        return await ctx.effect("charge", charge(calls, crash), node_input["amount"])

    h = Harness(Workflow(name="payments", edges=[("START", pay)]), store_backend)
    asked = await h.runner.run({"amount": 9}, invocation_id=INVOCATION)
    (gate_id,) = asked.interrupts
    crash["after"] = True
    with pytest.raises(Crash):
        await h.runner.resume([_answer(gate_id, {"decision": "approve"})])
    in_doubt = await h.check(await Runner(h.runner.workflow, store=h.store).drive(INVOCATION))
    ((question_id, request),) = in_doubt.interrupts.items()
    assert request.payload["effect"] == "charge"
    assert request.assignees == ["group:billing"]
    done = await h.resume({question_id: {"happened": True, "result": "paid"}})
    assert done.output == "paid"
    assert len(calls) == 1


@sync
async def test_an_effect_that_raised_is_recorded_failed_and_called_again_on_retry(store_backend):
    calls: list[Any] = []
    down = {"bank": True}

    def flaky_charge(amount, idempotency_key):
        calls.append(idempotency_key)
        if down["bank"]:
            raise ConnectionError("bank unreachable")
        return amount

    @node(name="pay")
    async def pay(node_input, ctx):
        return await ctx.effect("charge", flaky_charge, node_input)

    h = Harness(Workflow(name="wf", edges=[("START", pay)]), store_backend)
    failed = await h.run(4)
    assert failed.status == FAILED
    (record,) = (await effect_records(h, failed.invocation_id, "wf@1/pay@1")).values()
    assert record.status == EffectStatus.FAILED
    assert "bank unreachable" in record.error
    down["bank"] = False
    done = await h.retry(failed.invocation_id)
    assert done.output == 4
    assert calls[0] == calls[1]


@sync
async def test_effect_sync_in_a_synchronous_body_and_its_doubt(store_backend):
    calls: list[Any] = []
    crash = {"after": True}

    @node(name="pay")
    def pay(node_input, ctx):
        return ctx.effect_sync("charge", charge(calls, crash), node_input, idempotent=True)

    h = Harness(Workflow(name="payments", edges=[("START", pay)]), store_backend)
    done = await crash_then_recover(h, 12)
    assert done.output == {"charged": 12, "receipt": "r-2"}
    assert calls[0][1] == calls[1][1]


@sync
async def test_two_effects_of_one_name_in_one_run_fail_the_node(store_backend):
    @node(name="mail")
    async def mail(node_input, ctx):
        for address in node_input:
            await ctx.effect("send", str, address)
        return "sent"

    h = Harness(Workflow(name="wf", edges=[("START", mail)]), store_backend)
    failed = await h.run(["a@example.com", "b@example.com"])
    assert failed.status == FAILED
    assert "performed the effect 'send' twice" in failed.error


@sync
async def test_an_effect_costs_two_commits_and_no_read_on_a_first_run(store_backend):
    """Its start before the call, its finish before `ctx.effect` returns."""

    async def plain(node_input, ctx):
        return node_input

    async def effectful(node_input, ctx):
        return await ctx.effect("charge", lambda amount: amount, node_input)

    counts = {}
    for body in (plain, effectful):
        store = CountingStore(store_backend.new_store())
        runner = Runner(Workflow(name="wf", edges=[("START", node(name="n")(body))]), store=store)
        result = await runner.run(3)
        assert result.status == COMPLETED
        counts[body.__name__] = (store.commits, store.reads)
    assert counts["effectful"][0] == counts["plain"][0] + 2
    assert counts["effectful"][1] == counts["plain"][1]
