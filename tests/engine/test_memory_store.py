"""InMemoryStore shares the node-run states it keeps with the runs it leases to (the
engine only reads them) and copies what it hands to any other caller."""

import asyncio
import copy
from dataclasses import asdict

from workflows.engine import FunctionResponse, InMemoryStore, RequestInput, Runner, Workflow, node
from workflows.engine.status import NodeStatus


@node
def ask_twice():
    yield RequestInput(interrupt_id="first", message="first?")
    yield RequestInput(interrupt_id="second", message="second?")


@node
def after(node_input):
    return node_input


WORKFLOW = Workflow(name="wf", edges=[("START", ask_twice, after)])


def test_passes_change_no_node_run_state_the_store_kept():
    async def scenario() -> None:
        store = InMemoryStore()
        runner = Runner(WORKFLOW, store=store)
        started = await runner.run()
        kept = dict(store.node_runs[started.invocation_id])
        as_kept = {path: copy.deepcopy(asdict(state)) for path, state in kept.items()}
        for interrupt_id in ("first", "second"):
            await runner.resume([FunctionResponse(interrupt_id, "ask_twice", {"ok": True})])
            assert {path: asdict(state) for path, state in kept.items()} == as_kept
        assert (await runner.result(started.invocation_id)).status == NodeStatus.COMPLETED

    asyncio.run(scenario())


def test_a_loaded_checkpoint_is_the_callers_to_change():
    async def scenario() -> None:
        store = InMemoryStore()
        started = await Runner(WORKFLOW, store=store).run()
        checkpoint = await store.load_checkpoint(started.invocation_id)
        assert checkpoint is not None
        for state in checkpoint.node_runs.values():
            state.interrupt_ids.add("changed")
            state.resume_inputs["changed"] = True
            state.status = NodeStatus.FAILED
        for state in store.node_runs[started.invocation_id].values():
            assert "changed" not in state.interrupt_ids
            assert "changed" not in state.resume_inputs
            assert state.status != NodeStatus.FAILED

    asyncio.run(scenario())
