"""A child run that is its workflow's only work runs in the workflow's task, not a task of
its own: it must behave as it would in a task (InMemoryStore)."""

import asyncio
import contextvars

from workflows.engine import InMemoryStore, Runner, Workflow, node
from workflows.engine.status import NodeStatus

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


def test_context_variables_a_node_sets_stay_its_own():
    seen: list[str] = []

    @node
    def sets():
        marker.set("set by the first node")
        return 1

    @node
    def reads(node_input):
        seen.append(marker.get())
        return node_input

    result = asyncio.run(Runner(Workflow(name="wf", edges=[("START", sets, reads)])).run())
    assert result.status == NodeStatus.COMPLETED
    assert seen == ["unset"]


def test_cancelling_the_caller_stops_the_run_and_gives_the_lease_back():
    async def scenario() -> None:
        started = asyncio.Event()

        @node
        def first():
            return 1

        @node
        async def waits():
            started.set()
            await asyncio.Event().wait()

        store = InMemoryStore()
        runner = Runner(Workflow(name="wf", edges=[("START", first, waits)]), store=store)
        run = asyncio.ensure_future(runner.run())
        await started.wait()
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        assert run.cancelled()
        (invocation_id,) = store.invocations
        runs = store.node_runs[invocation_id]
        assert runs["wf@1/first@1"].status == NodeStatus.COMPLETED
        # What was committed before the cancellation stays; the next pass takes over.
        assert runs["wf@1/waits@1"].status == NodeStatus.RUNNING
        assert invocation_id not in store._leases

    asyncio.run(scenario())


def test_a_nested_workflow_over_its_timeout_fails_and_cancels_its_child():
    @node
    async def waits():
        await asyncio.Event().wait()  # never set: only the timeout ends it

    inner = Workflow(name="inner", edges=[("START", waits)])
    inner.timeout = 0.05
    result = asyncio.run(Runner(Workflow(name="outer", edges=[("START", inner)])).run())
    assert result.status == NodeStatus.FAILED
    assert result.error == "NodeTimeoutError: node 'inner' timed out after 0.05 s"
    statuses = {path: state.status for path, state in result.node_runs.items()}
    assert statuses == {
        "outer@1": NodeStatus.FAILED,
        "outer@1/inner@1": NodeStatus.FAILED,
        "outer@1/inner@1/waits@1": NodeStatus.CANCELLED,
    }
