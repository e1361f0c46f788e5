"""The execution lease while a node body runs: a heartbeat keeps it, a run that loses it
stops before writing (InMemoryStore; the database stores are tested in tests/workflows)."""

import asyncio

from workflows.engine import InMemoryStore, Runner, Workflow, node
from workflows.engine.status import NodeStatus


def test_a_body_longer_than_the_lease_runs_once_while_others_try_to_take_over():
    starts: list[str] = []

    async def scenario() -> None:
        release = asyncio.Event()

        @node
        async def slow():
            starts.append("slow")
            await release.wait()
            return "done"

        store = InMemoryStore()
        runner = Runner(Workflow(name="wf", edges=[("START", slow)]), store=store, lease_ttl=0.06)
        first = asyncio.ensure_future(runner.run())
        while not starts:
            await asyncio.sleep(0.01)
        (invocation_id,) = store.invocations
        # Well past the lease length, other deliveries find it held (the heartbeat renews it).
        for _ in range(10):
            await asyncio.sleep(0.03)
            took_over = asyncio.ensure_future(runner.advance(invocation_id, wait=False))
            done, _ = await asyncio.wait([took_over], timeout=0.02)
            assert done and took_over.result() is False, "another run took the lease over"
        release.set()
        result = await first
        assert result.status == NodeStatus.COMPLETED

    asyncio.run(scenario())
    assert starts == ["slow"]


def test_a_run_that_lost_its_lease_stops_before_writing():
    after_wait: list[str] = []

    async def scenario() -> None:
        @node
        async def slow():
            await asyncio.sleep(0.5)
            after_wait.append("side effect")
            return "done"

        store = InMemoryStore()
        runner = Runner(Workflow(name="wf", edges=[("START", slow)]), store=store, lease_ttl=0.06)
        first = asyncio.ensure_future(runner.run())
        while not store.invocations:
            await asyncio.sleep(0.005)
        (invocation_id,) = store.invocations
        await asyncio.sleep(0.01)
        store._leases[invocation_id] = ("another worker", float("inf"))  # taken over
        result = await first
        assert result.status == NodeStatus.RUNNING  # the other run decides the outcome
        assert store.node_runs[invocation_id]["wf@1/slow@1"].status == NodeStatus.RUNNING

    asyncio.run(scenario())
    assert after_wait == []
