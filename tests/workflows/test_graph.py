"""workflows.graph: a workflow as nodes and edges, and an invocation's statuses over it."""

import asyncio
from types import SimpleNamespace

from workflows.engine import FunctionResponse, JoinNode, RequestInput, Runner, Workflow, node
from workflows.graph import node_id, with_statuses, workflow_graph


@node
def ask(node_input):
    return RequestInput(message=f"ok {node_input}?")


@node
def double(node_input):
    return node_input * 2


@node(name="ask_each", parallel_worker=True)
def ask_each(node_input):
    return RequestInput(message=f"item {node_input}?")


@node(rerun_on_resume=True)
async def delegate(ctx, node_input):
    return await ctx.run_node(double, len(node_input))


def nested() -> Workflow:
    join = JoinNode(name="both")
    inner = Workflow(name="inner", edges=[("START", ask, join), ("START", double, join)])
    return Workflow(name="outer", edges=[("START", inner, delegate, {"done": ask_each})])


def drive(workflow: Workflow, node_input):
    runner = Runner(workflow)
    result = asyncio.run(runner.run(node_input))
    return runner, result


def runs(result):
    return [SimpleNamespace(path=p, status=s.status) for p, s in result.node_runs.items()]


def test_nested_workflows_become_clusters_with_entry_and_exits():
    graph = workflow_graph(nested())
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["outer/inner"] == {
        "id": "outer/inner",
        "name": "inner",
        "kind": "workflow",
        "parent": None,
        "entry": "outer/inner/START",
        "exits": ["outer/inner/both"],
    }
    assert nodes["outer/inner/ask"]["parent"] == "outer/inner"
    assert nodes["outer/inner/both"]["kind"] == "join"
    assert nodes["outer/ask_each"]["kind"] == "parallel_worker"
    assert {"source": "outer/delegate", "target": "outer/ask_each", "route": "done"} in graph[
        "edges"
    ]
    assert {"source": "outer/inner/START", "target": "outer/inner/ask", "route": None} in graph[
        "edges"
    ]


def test_node_ids_are_paths_without_run_ids():
    assert node_id("outer@1/inner@1/ask@3") == "outer/inner/ask"


def test_statuses_come_from_the_latest_run_and_dynamic_children_become_items():
    workflow = nested()
    runner, result = drive(workflow, 3)
    graph = with_statuses(workflow_graph(workflow), runs(result))
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["outer/START"]["status"] == "COMPLETED"
    assert nodes["outer/inner"]["status"] == "WAITING"
    assert nodes["outer/inner/START"]["status"] == "COMPLETED"
    assert nodes["outer/inner/ask"]["status"] == "WAITING"
    assert nodes["outer/inner/ask"]["path"] == "outer@1/inner@1/ask@1"
    assert nodes["outer/inner/double"]["status"] == "COMPLETED"
    assert nodes["outer/delegate"]["status"] is None and nodes["outer/delegate"]["runs"] == 0

    (question,) = result.interrupts
    result = asyncio.run(runner.resume([FunctionResponse(question, "ask", {"ok": True})]))
    graph = with_statuses(workflow_graph(workflow), runs(result))
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["outer/delegate"]["items"] == [  # started with ctx.run_node
        {"path": "outer@1/delegate@1/double@1", "label": "double@1", "status": "COMPLETED"}
    ]


def test_parallel_worker_items_and_runs_of_nodes_the_definition_lost():
    worker = Workflow(name="outer", edges=[("START", ask_each)])
    _, result = drive(worker, ["a", "b"])
    stale = SimpleNamespace(path="outer@1/removed@1", status="COMPLETED")
    graph = with_statuses(workflow_graph(worker), [*runs(result), stale])
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert [(i["label"], i["status"]) for i in nodes["outer/ask_each"]["items"]] == [
        ("ask_each@1", "WAITING"),
        ("ask_each@2", "WAITING"),
    ]
    assert set(nodes) == {"outer/START", "outer/ask_each"}  # the lost node is not drawn


def test_statuses_leave_the_definition_graph_untouched():
    graph = workflow_graph(nested())
    before = repr(graph)
    with_statuses(graph, [SimpleNamespace(path="outer@1/inner@1", status="RUNNING")])
    assert repr(graph) == before


def test_a_superseded_run_is_greyed_only_where_no_run_of_its_node_counts():
    def run(path, status):
        return SimpleNamespace(path=path, status=status)

    graph = with_statuses(
        workflow_graph(nested()),
        [
            run("outer@1", "RUNNING"),
            run("outer@1/delegate@1", "COMPLETED"),  # a loop's kept round
            run("outer@1/delegate@2", "SUPERSEDED"),  # its later round, superseded
            run("outer@1/ask_each@1", "SUPERSEDED"),  # not run again (another route)
            run("outer@1/delegate@1/double@1", "COMPLETED"),
            run("outer@1/delegate@2/double@1", "SUPERSEDED"),  # the same item, superseded
            run("outer@1/delegate@1/double@2", "SUPERSEDED"),
        ],
    )
    nodes = {n["id"]: n for n in graph["nodes"]}
    delegate_node = nodes["outer/delegate"]
    assert (delegate_node["status"], delegate_node["runs"], delegate_node["superseded"]) == (
        "COMPLETED",
        2,
        1,
    )
    assert delegate_node["path"] == "outer@1/delegate@1"
    assert (nodes["outer/ask_each"]["status"], nodes["outer/ask_each"]["superseded"]) == (
        "SUPERSEDED",
        1,
    )
    items = [(i["label"], i["status"]) for i in delegate_node["items"]]
    assert items == [("double@1", "COMPLETED"), ("double@2", "SUPERSEDED")]
