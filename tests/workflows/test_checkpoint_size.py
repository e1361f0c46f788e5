"""What a run loads (issue: "every lease acquisition reloads every node run's input and
output"): the checkpoint a lease hands to a run leaves out the inputs and outputs of
completed node runs; a re-running parent that reuses a completed child fetches that
parent's children's outputs once. On SQLite, and on PostgreSQL when DATABASE_URL is set."""

import pytest

from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.state import NOT_LOADED
from workflows.engine.status import NodeStatus
from workflows.registry import registry
from workflows.store import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

MEGABYTE = "x" * 1_000_000


@pytest.fixture
def register():
    names = []

    def add(workflow):
        registry.register(workflow)
        names.append(workflow.name)
        return workflow

    yield add
    for name in names:
        registry.unregister(name)


def test_a_lease_loads_no_completed_node_run_value(register):
    def step(name):
        @node(name=name)
        def body(node_input):
            return node_input

        return body

    @node
    def ask(node_input):
        return RequestInput(interrupt_id="size-q", payload={"length": len(node_input)})

    @node
    def after(node_input):
        return node_input["length"]

    steps = [step(f"s{i}") for i in range(10)]
    register(Workflow(name="size_chain", edges=[("START", *steps, ask, after)]))
    invocation = services.start("size_chain", MEGABYTE)
    checkpoint = DjangoStore().acquire_lease_sync(str(invocation.pk), "reader", 60)
    completed = [s for s in checkpoint.node_runs.values() if s.status == NodeStatus.COMPLETED]
    assert len(completed) == 10
    assert all(s.input is NOT_LOADED and s.output is NOT_LOADED for s in completed)
    loaded = sum(
        len(str(s.input)) + len(str(s.output))
        for s in checkpoint.node_runs.values()
        if s.status != NodeStatus.COMPLETED
    )
    assert loaded < 2_100_000  # the waiting node's input and the root's: not 22 MB
    DjangoStore().release_lease_sync(str(invocation.pk), "reader")
    services.submit_function_responses([FunctionResponse("size-q", "ask", {"length": 7})])
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, 7)


def test_a_rerun_parent_reuses_its_completed_childs_stored_output(register):
    calls = []

    @node
    def child(node_input):
        calls.append(node_input)
        return {"made": node_input}

    @node(rerun_on_resume=True)
    async def parent(ctx, node_input):
        made = await ctx.run_node(child, node_input)
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id="reuse-q")
        return [made, ctx.resume_inputs["reuse-q"]]

    register(Workflow(name="size_reuse", edges=[("START", parent)]))
    invocation = services.start("size_reuse", "v")
    services.submit_function_responses([FunctionResponse("reuse-q", "parent", "ok")])
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, [{"made": "v"}, "ok"])
    assert calls == ["v"]  # the child ran once; its output came from the database
