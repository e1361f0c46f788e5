"""Grants: approving with `remember` lets later dispatches of the same gate (same workflow
and node name) in the grant's scope pass without asking, within its pins, expiry and uses;
every pass is recorded with the grant that allowed it."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workflows.engine import (
    GrantRecord,
    GrantScope,
    ResponseValidationError,
    Runner,
    Workflow,
    approval_gate,
    node,
)
from workflows.engine.errors import UnknownGrantError

from .helpers import COMPLETED, WAITING, CountingStore, Harness, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")

PAY_ARGS = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "customer": {"type": "string"}},
    "required": ["amount", "customer"],
}


def payouts_workflow(
    paid: list[Any], name: str = "payouts", remember: tuple[str, ...] = ("invocation",)
) -> Workflow:
    """Pays each of the input's payouts in turn through the gated node `pay`:
    START -> pick -> pay -> pick ... -> finish."""

    @node(name="pick")
    def pick(node_input, ctx):
        todo = node_input["todo"]
        if not todo:
            ctx.route = "done"
            return {"paid": node_input.get("paid", [])}
        ctx.route = "pay"
        return {**todo[0], "todo": todo[1:], "paid": node_input.get("paid", [])}

    @approval_gate(message="Pay {amount} to {customer}?", args_schema=PAY_ARGS, remember=remember)
    @node(name="pay")
    def pay(node_input):
        paid.append(node_input["amount"])
        return {"todo": node_input["todo"], "paid": [*node_input["paid"], node_input["amount"]]}

    @node
    def finish(node_input):
        return node_input

    return Workflow(name=name, edges=[("START", pick, {"pay": pay, "done": finish}), (pay, pick)])


def payouts(*amounts: float) -> dict[str, Any]:
    return {"todo": [{"amount": a, "customer": "ann"} for a in amounts]}


def question(result) -> tuple[str, Any]:
    assert result.status == WAITING, result.error
    ((interrupt_id, request),) = result.interrupts.items()
    return interrupt_id, request


async def approve(h: Harness, result, **answer: Any):
    interrupt_id, _ = question(result)
    return await h.resume({interrupt_id: {"decision": "approve", **answer}})


@sync
async def test_an_invocation_grant_lets_later_dispatches_pass_and_records_each_use(store_backend):
    paid: list[Any] = []
    h = Harness(payouts_workflow(paid), store_backend)
    first = await h.run(payouts(5, 6, 7))
    done = await approve(h, first, remember="invocation")
    assert done.status == COMPLETED
    assert done.output == {"paid": [5, 6, 7]}
    (grant,) = (await store_backend.grants(h.store)).values()
    assert (grant.workflow_name, grant.node_name) == ("payouts", "pay")
    assert (grant.scope, grant.scope_id) == (GrantScope.INVOCATION, first.invocation_id)
    uses = await store_backend.grant_uses(h.store)
    # The approving dispatch did not use its grant; the two later ones did, named.
    assert [(u.grant_id, u.path) for u in uses] == [
        (grant.id, "payouts@1/pay@2"),
        (grant.id, "payouts@1/pay@3"),
    ]
    assert {u.invocation_id for u in uses} == {first.invocation_id}
    # Another invocation is outside the grant's scope: it asks.
    question(await h.run(payouts(5)))


@sync
async def test_the_approving_dispatch_does_not_use_up_its_own_grant(store_backend):
    paid: list[Any] = []
    h = Harness(payouts_workflow(paid), store_backend)
    first = await h.run(payouts(1, 2, 3))
    asked_again = await approve(h, first, remember="invocation", uses_left=1)
    assert paid == [1, 2]  # the second passed on the grant's one use
    _, request = question(asked_again)  # the third asks: the grant is used up
    assert request.payload["args"]["amount"] == 3
    (grant,) = (await store_backend.grants(h.store)).values()
    assert grant.uses_left == 0
    assert len(await store_backend.grant_uses(h.store)) == 1


@sync
async def test_args_outside_the_pins_ask_again(store_backend):
    paid: list[Any] = []
    h = Harness(payouts_workflow(paid), store_backend)
    first = await h.run(payouts(5, 8, 50, 9))
    pins = {"properties": {"amount": {"maximum": 10}}}
    asked = await approve(h, first, remember="invocation", pins=pins)
    assert paid == [5, 8]
    _, request = question(asked)
    assert request.payload["args"]["amount"] == 50
    done = await approve(h, asked)
    assert done.output == {"paid": [5, 8, 50, 9]}  # 9 is within the pins again


@sync
async def test_a_session_grant_covers_the_session_and_nothing_else(store_backend):
    paid: list[Any] = []
    workflow = payouts_workflow(paid, remember=("session",))
    h = Harness(workflow, store_backend)
    session, other = (
        await store_backend.new_session(h.store),
        await store_backend.new_session(h.store),
    )
    first = await h.runner.run(payouts(5), session_id=session)
    await h.check(await approve(h, first, remember="session"))
    same_session = await h.runner.run(payouts(6), session_id=session)
    assert same_session.status == COMPLETED
    other_session = await h.runner.run(payouts(7), session_id=other)
    assert other_session.status == WAITING
    assert paid == [5, 6]


@sync
async def test_an_always_grant_covers_every_invocation_of_the_same_gate_only(store_backend):
    paid: list[Any] = []
    store_h = Harness(payouts_workflow(paid, remember=("always",)), store_backend)
    await approve(store_h, await store_h.run(payouts(5)), remember="always")
    assert (await store_h.run(payouts(6))).status == COMPLETED
    # The same node name in another workflow is another gate.
    rebates = payouts_workflow(paid, name="rebates", remember=("always",))
    other = Harness(rebates, store_backend, store_h.store)
    question(await other.run(payouts(7)))
    assert paid == [5, 6]


@sync
async def test_a_grant_of_a_scope_the_gate_no_longer_allows_is_ignored(store_backend):
    h = Harness(payouts_workflow([], remember=("invocation",)), store_backend)
    await h.store.record_grant(
        GrantRecord(id="g-always", workflow_name="payouts", node_name="pay", scope="always")
    )
    assert set(await store_backend.grants(h.store)) == {"g-always"}
    question(await h.run(payouts(5)))
    assert await store_backend.grant_uses(h.store) == []


@sync
async def test_an_expired_grant_asks_and_ttl_sets_the_expiry(store_backend):
    h = Harness(payouts_workflow([], remember=("always",)), store_backend)
    past = datetime.now(UTC) - timedelta(seconds=1)
    await h.store.record_grant(
        GrantRecord(
            id="g-old",
            workflow_name="payouts",
            node_name="pay",
            scope="always",
            expires_at=past,
        )
    )
    asked = await h.run(payouts(5))
    before = datetime.now(UTC)
    await approve(h, asked, remember="always", ttl_seconds=60)
    made = [g for g in (await store_backend.grants(h.store)).values() if g.id != "g-old"]
    (grant,) = made
    assert (
        before + timedelta(seconds=59)
        < grant.expires_at
        <= datetime.now(UTC) + timedelta(seconds=60)
    )


@sync
async def test_a_revoked_grant_asks_again(store_backend):
    paid: list[Any] = []
    h = Harness(payouts_workflow(paid, remember=("always",)), store_backend)
    await approve(h, await h.run(payouts(5)), remember="always")
    (grant,) = (await store_backend.grants(h.store)).values()
    revoked = await h.store.revoke_grant(grant.id, datetime.now(UTC))
    assert revoked.revoked_at is not None
    again = await h.store.revoke_grant(grant.id, datetime.now(UTC) + timedelta(hours=1))
    assert again.revoked_at == revoked.revoked_at  # revoking twice keeps the first time
    question(await h.run(payouts(6)))
    assert paid == [5]
    with pytest.raises(UnknownGrantError):
        await h.store.revoke_grant("no-such-grant", datetime.now(UTC))


class RevokingStore:
    """A store that revokes every grant it finds right after finding it: the grant a
    dispatch is about to pass on is gone by the time its use is committed."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def find_grants(self, *args: Any) -> Any:
        found = await self._store.find_grants(*args)
        for grant in found:
            await self._store.revoke_grant(grant.id, datetime.now(UTC) - timedelta(seconds=1))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@sync
async def test_a_grant_revoked_between_finding_and_using_it_asks_and_records_no_use(store_backend):
    paid: list[Any] = []
    workflow = payouts_workflow(paid, remember=("always",))
    h = Harness(workflow, store_backend)
    await approve(h, await h.run(payouts(5)), remember="always")
    racing = Harness(workflow, store_backend, RevokingStore(h.store))
    _, request = question(await racing.run(payouts(6)))
    assert request.payload["args"]["amount"] == 6
    assert paid == [5]
    assert await store_backend.grant_uses(h.store) == []


@pytest.mark.parametrize(
    "answer",
    [
        {"decision": "approve", "remember": "always"},  # not one of the gate's scopes
        {"decision": "approve", "remember": "invocation", "pins": {"type": "nope"}},
        {"decision": "approve", "pins": {"properties": {}}},  # pins without remember
        {"decision": "approve", "remember": "invocation", "uses_left": 0},
        {"decision": "approve", "remember": "invocation", "ttl_seconds": "1h"},
    ],
)
@sync
async def test_an_invalid_grant_is_refused_with_the_answer_and_nothing_is_stored(
    answer, store_backend
):
    h = Harness(payouts_workflow([]), store_backend)
    interrupt_id, _ = question(await h.run(payouts(5)))
    before = await h.snapshot()
    with pytest.raises(ResponseValidationError):
        await h.resume({interrupt_id: answer})
    assert await h.snapshot() == before
    assert await store_backend.grants(h.store) == {}


@sync
async def test_passing_on_a_grant_costs_one_read_and_no_commit_more_than_an_ungated_node(
    store_backend,
):
    @node(name="pay")
    def ungated(node_input):
        return node_input

    gated = approval_gate(message="Pay?", remember=("always",))(ungated)
    plain_store = CountingStore(store_backend.new_store())
    plain = await Runner(Workflow(name="payouts", edges=[("START", ungated)]), plain_store).run(1)
    gated_store = CountingStore(store_backend.new_store())
    await gated_store.record_grant(
        GrantRecord(id="g-1", workflow_name="payouts", node_name="pay", scope="always")
    )
    runner = Runner(Workflow(name="payouts", edges=[("START", gated)]), gated_store)
    passed = await runner.run(1)
    assert (plain.status, passed.status) == (COMPLETED, COMPLETED)
    assert gated_store.reads == plain_store.reads + 1
    assert gated_store.commits == plain_store.commits


@sync
async def test_a_rejection_remembers_nothing(store_backend):
    h = Harness(payouts_workflow([]), store_backend)
    interrupt_id, _ = question(await h.run(payouts(5)))
    answer = {"decision": "reject", "reason": "no", "remember": "invocation"}
    rejected = await h.resume({interrupt_id: answer})
    assert rejected.node_runs["payouts@1/pay@1"].output == {"rejected": True, "reason": "no"}
    assert await store_backend.grants(h.store) == {}


@sync
async def test_the_narrowest_grant_is_used_first(store_backend):
    h = Harness(payouts_workflow([], remember=("invocation", "always")), store_backend)
    asked = await h.run(payouts(7, 8))
    await h.store.record_grant(
        GrantRecord(id="g-always", workflow_name="payouts", node_name="pay", scope="always")
    )
    done = await approve(h, asked, remember="invocation")
    assert done.status == COMPLETED
    (narrow,) = [
        g for g in (await store_backend.grants(h.store)).values() if g.scope == "invocation"
    ]
    assert [u.grant_id for u in await store_backend.grant_uses(h.store)] == [narrow.id]
