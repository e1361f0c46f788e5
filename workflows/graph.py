"""A workflow as nodes and edges: what the admin draws and the API lists.

`workflow_graph(workflow)` flattens nested workflows into clusters; `with_statuses(graph,
node_runs)` lays an invocation's node runs over it. Node ids are node paths without run
ids (`expense_approval/large_expense/finance_approval`), so a node run maps to its node by
dropping the `@<run_id>` of each path segment.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Protocol

from .engine.nodes import START
from .engine.status import NodeStatus
from .engine.workflow import Workflow, node_kind


class NodeRunLike(Protocol):
    path: str
    status: str


def workflow_graph(workflow: Workflow) -> dict[str, Any]:
    """The static graph of `workflow`, nested workflows included, as JSON-ready data.

    Returns `{"name": ..., "nodes": [...], "edges": [...]}`:

    - each node is `{"id", "name", "kind", "parent"}`; `kind` is "start", "node", "join",
      "parallel_worker" or "workflow"; `parent` is the id of the nested workflow holding it
      (None at the top level). A "workflow" node is a cluster: it also carries `entry` (the
      id of its START) and `exits` (its terminal nodes), so an edge into or out of it can
      be drawn through them.
    - each edge is `{"source", "target", "route"}` with node ids; `route` is None for an
      edge that always fires.
    """
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    _add_scope(workflow, workflow.name, None, nodes, edges)
    return {"name": workflow.name, "nodes": nodes, "edges": edges}


def _add_scope(
    workflow: Workflow,
    prefix: str,
    parent: str | None,
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
) -> None:
    nodes.append({"id": f"{prefix}/{START}", "name": START, "kind": "start", "parent": parent})
    for child in workflow.nodes.values():
        child_id = f"{prefix}/{child.name}"
        entry: dict[str, Any] = {
            "id": child_id,
            "name": child.name,
            "kind": node_kind(child),
            "parent": parent,
        }
        nodes.append(entry)
        if isinstance(child, Workflow):
            entry["entry"] = f"{child_id}/{START}"
            entry["exits"] = [f"{child_id}/{name}" for name in _terminals(child)]
            _add_scope(child, child_id, child_id, nodes, edges)
    edges.extend(
        {"source": f"{prefix}/{e.source}", "target": f"{prefix}/{e.target}", "route": e.route}
        for e in workflow.edges
    )


def _terminals(workflow: Workflow) -> list[str]:
    return [name for name in workflow.nodes if workflow.is_terminal(name)]


def node_id(path: str) -> str:
    """The graph node a node-run path belongs to: its path without run ids."""
    return "/".join(segment.partition("@")[0] for segment in path.split("/"))


def with_statuses(graph: dict[str, Any], node_runs: Iterable[NodeRunLike]) -> dict[str, Any]:
    """A copy of `graph` with each node's status taken from its latest run.

    `node_runs` come in the order they were created. Each node gains `status` (None when it
    never ran), `runs` (how many times it ran), `superseded` (how many of those runs a
    rewind superseded) and `path` (its latest run's path). A superseded run (DESIGN 3.8)
    never hides a run that still counts: a node is SUPERSEDED, drawn greyed, only when no
    run of it counts. Runs the static graph has no node for (parallel-worker items,
    children started with `ctx.run_node`) become `items` of their nearest node: `{"path",
    "label", "status"}`. A START is COMPLETED once its workflow ran.
    """
    annotated = copy.deepcopy(graph)
    by_id = {node["id"]: node for node in annotated["nodes"]}
    for node in annotated["nodes"]:
        node.update(status=None, runs=0, superseded=0, path=None, items=[])
    started: set[str] = set()
    items: dict[str, dict[str, dict[str, Any]]] = {}
    for run in node_runs:
        segments = run.path.split("/")
        if len(segments) == 1:
            started.add(node_id(run.path))  # the root run: the workflow itself
            continue
        ids = [node_id("/".join(segments[: n + 1])) for n in range(len(segments))]
        superseded = run.status == NodeStatus.SUPERSEDED
        if ids[-1] in by_id:
            node = by_id[ids[-1]]
            node["runs"] += 1
            node["superseded"] += superseded
            if not superseded or node["status"] in (None, NodeStatus.SUPERSEDED):
                node.update(status=str(run.status), path=run.path)
            started.add(ids[-1])
            continue
        owner = next((i for i in reversed(ids) if i in by_id), None)
        if owner is None:
            continue  # a run of a node the definition no longer has
        depth = ids.index(owner) + 1
        label = "/".join(segments[depth:])
        # A node that ran again replaces its earlier items of the same label (a superseded
        # run replaces none that counts).
        owned = items.setdefault(owner, {})
        if superseded and owned.get(label, {}).get("status") not in (None, NodeStatus.SUPERSEDED):
            continue
        owned[label] = {"path": run.path, "label": label, "status": str(run.status)}
    for owner, owned in items.items():
        by_id[owner]["items"] = list(owned.values())
    for node in annotated["nodes"]:
        if node["kind"] == "start" and (node["parent"] or annotated["name"]) in started:
            node["status"] = NodeStatus.COMPLETED.value
    return annotated
