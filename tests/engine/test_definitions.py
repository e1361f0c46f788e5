"""Graph definition errors, terminal outputs, node kinds, paths and public names."""

import pytest

import workflows.engine as engine
from workflows.engine import (
    START,
    BaseNode,
    FunctionNode,
    JoinNode,
    RequestInput,
    Workflow,
    node,
)
from workflows.engine.errors import GraphError

from .helpers import COMPLETED, FAILED, WAITING, Harness, statuses, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")


@node
def a(node_input):
    return "a"


@node
def b(node_input):
    return "b"


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([(a, b)], "no edge from START"),
        ([("START",)], "at least two items"),
        ([("START", {"x": a}, b)], "routing dict must be the last item"),
        ([("START", "missing")], "no node named 'missing'"),
        ([("START", a), (a, START)], "START cannot be an edge target"),
        ([("START", a), ("START", FunctionNode(lambda: 1, name="a"))], "two different nodes"),
        ([("START", 42)], "is not a node or a function"),
    ],
)
def test_bad_edges_raise_graph_error(edges, message):
    with pytest.raises(GraphError) as excinfo:
        Workflow(name="wf", edges=edges)
    assert message in str(excinfo.value)


@pytest.mark.parametrize("name", ["a/b", "a@1", "START"])
def test_bad_node_names_raise_graph_error(name):
    with pytest.raises(GraphError) as excinfo:
        FunctionNode(lambda: None, name=name)
    assert repr(name) in str(excinfo.value)


def test_unbindable_parameter_raises_graph_error():
    def needs(node_input, other):
        return other

    with pytest.raises(GraphError) as excinfo:
        node(needs)
    assert "other" in str(excinfo.value)


def test_graph_description():
    review = node(name="review")(lambda node_input: node_input)
    wf = Workflow(name="wf", edges=[("START", a, review), (review, {"ok": b, "again": a})])
    assert wf.graph() == {
        "name": "wf",
        "nodes": [
            {"name": "START", "kind": "start"},
            {"name": "a", "kind": "node"},
            {"name": "review", "kind": "node"},
            {"name": "b", "kind": "node"},
        ],
        "edges": [
            {"source": "START", "target": "a", "route": None},
            {"source": "a", "target": "review", "route": None},
            {"source": "review", "target": "b", "route": "ok"},
            {"source": "review", "target": "a", "route": "again"},
        ],
    }


@sync
async def test_two_terminal_outputs_fail_the_workflow(store_backend):
    h = Harness(Workflow(name="wf", edges=[("START", a), ("START", b)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert "second terminal output" in result.error
    assert result.node_runs["wf@1"].status == FAILED


@sync
async def test_second_terminal_output_counted_across_resumes_fails(store_backend):
    @node
    def ask(node_input):
        return RequestInput(interrupt_id="late")

    h = Harness(Workflow(name="wf", edges=[("START", a), ("START", ask)]), store_backend)
    first = await h.run()
    assert first.status == WAITING
    assert first.node_runs["wf@1"].output == "a"  # first terminal output kept
    result = await h.resume({"late": "second"})
    assert result.status == FAILED
    assert "second terminal output" in result.error
    assert "wf@1/ask@1" in result.error


@sync
async def test_terminal_without_output_does_not_count(store_backend):
    @node
    def silent(node_input):
        return None

    h = Harness(Workflow(name="wf", edges=[("START", a), ("START", silent)]), store_backend)
    result = await h.run()
    assert result.status == COMPLETED
    assert result.output == "a"


@sync
async def test_node_with_two_outputs_fails(store_backend):
    @node
    def twice(node_input):
        yield 1
        yield 2

    h = Harness(Workflow(name="wf", edges=[("START", twice)]), store_backend)
    result = await h.run()
    assert result.status == FAILED
    assert result.error == "NodeOutputError: node 'twice' produced a second output"
    assert statuses(result) == {"wf@1": FAILED, "wf@1/twice@1": FAILED}


@sync
async def test_node_kinds_and_input_binding(store_backend):
    class Double(BaseNode):
        def run(self, ctx, node_input):
            return node_input * 2

    @node(name="add_one")
    async def add_one(node_input):
        return node_input + 1

    def plain(ctx, node_input):
        return {"value": node_input, "path": ctx.path, "run_id": ctx.run_id}

    async def agen(node_input):
        yield node_input

    h = Harness(
        Workflow(name="kinds", edges=[("START", Double("double"), add_one, agen, plain)]),
        store_backend,
    )
    result = await h.run(5)
    assert result.output == {"value": 11, "path": "kinds@1/plain@1", "run_id": 1}
    assert list(result.node_runs) == [
        "kinds@1",
        "kinds@1/double@1",
        "kinds@1/add_one@1",
        "kinds@1/agen@1",
        "kinds@1/plain@1",
    ]


@sync
async def test_route_set_before_interrupt_is_kept_through_resume(store_backend):
    @node
    def classify(ctx, node_input):
        ctx.route = "big" if node_input > 100 else "small"
        return RequestInput(interrupt_id="confirm")

    @node
    def big(node_input):
        return f"big:{node_input}"

    @node
    def small(node_input):
        return f"small:{node_input}"

    h = Harness(
        Workflow(name="wf", edges=[("START", classify, {"big": big, "small": small})]),
        store_backend,
    )
    await h.run(500)
    done = await h.resume({"confirm": "yes"})
    assert done.output == "big:yes"
    assert done.node_runs["wf@1/classify@1"].route == "big"
    assert "wf@1/small@1" not in done.node_runs


def test_public_surface():
    for name in (
        "Workflow",
        "node",
        "BaseNode",
        "FunctionNode",
        "JoinNode",
        "START",
        "Context",
        "NodeRunner",
        "Event",
        "FunctionCall",
        "FunctionResponse",
        "RequestInput",
        "NodeStatus",
        "RetryConfig",
        "Runner",
        "InMemoryStore",
    ):
        assert hasattr(engine, name), name
    assert engine.NodeStatus.WAITING == "WAITING"


@sync
async def test_join_behind_an_untaken_route_fails_the_workflow_clearly(store_backend):
    @node
    def split(ctx):
        ctx.route = "left"
        return 1

    @node
    def left(node_input):
        return node_input

    @node
    def right(node_input):
        return node_input

    join = JoinNode(name="both")
    workflow = Workflow(
        name="routed_join",
        edges=[("START", split, {"left": left, "right": right}), (left, join), (right, join)],
    )
    result = await Harness(workflow, store_backend).run(None)
    assert result.status == FAILED
    assert result.error == (
        "GraphError: workflow 'routed_join' cannot finish: join 'both' never got input from right"
    )


def test_timeout_policy_is_fail_or_a_default_answer():
    from datetime import timedelta

    from workflows.engine import DefaultResponse

    assert RequestInput().on_timeout == "fail"
    plain = RequestInput(timeout=timedelta(hours=1), on_timeout={"approved": False})
    assert plain.on_timeout == DefaultResponse({"approved": False})
    assert RequestInput.from_dict(plain.to_dict()) == plain
    assert RequestInput.from_dict(RequestInput(on_timeout="fail").to_dict()).on_timeout == "fail"
