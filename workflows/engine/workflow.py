"""Workflow: a graph of nodes that is itself a node."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from .child_runs import run_child
from .context import Context, child_path
from .errors import DefinitionChangedError, GraphError, NodeOutputError
from .events import Event
from .nodes import START, BaseNode, JoinNode, ParallelWorker, as_node
from .state import NodeRunState, copied
from .status import NodeStatus
from .stepping import run_isolated


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    route: str | None = None


class Workflow(BaseNode):
    """`Workflow(name=..., edges=[...])`.

    Each edge is a tuple chaining nodes, `("START", a, b)`; a dict as its last item routes,
    `(a, {"approve": b, "reject": c})` (a value may also be a list of nodes). Functions
    are wrapped as nodes; a node may be referred to again by its name.
    """

    rerun_on_resume = True
    checkpoint_before_run = False
    outputs_a_childs_output = True  # its terminal node's

    def __init__(self, name: str, edges: list[tuple[Any, ...]]) -> None:
        super().__init__(name)
        self.nodes: dict[str, BaseNode] = {}
        self.edges: list[Edge] = []
        self._wrapped: dict[int, BaseNode] = {}
        self._out: dict[str, list[Edge]] = defaultdict(list)
        self.predecessors: dict[str, list[str]] = defaultdict(list)
        for spec in edges:
            self._add_edge_spec(spec)
        if not self._out.get(START):
            raise GraphError(f"workflow {name!r} has no edge from START")

    def _add_edge_spec(self, spec: Any) -> None:
        items = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        if len(items) < 2:
            raise GraphError(f"edge {spec!r} needs at least two items")
        for index, (source, target) in enumerate(itertools.pairwise(items)):
            if isinstance(source, dict):
                raise GraphError(f"edge {spec!r}: a routing dict must be the last item")
            source_name = self._resolve(source)
            if isinstance(target, dict):
                if index != len(items) - 2:
                    raise GraphError(f"edge {spec!r}: a routing dict must be the last item")
                for route, targets in target.items():
                    group = targets if isinstance(targets, (list, tuple)) else [targets]
                    for routed in group:
                        self._connect(source_name, self._resolve(routed), str(route))
            else:
                self._connect(source_name, self._resolve(target), None)

    def _resolve(self, item: Any) -> str:
        if item is START or item == START:
            return START
        if isinstance(item, str):
            if item not in self.nodes:
                raise GraphError(f"workflow {self.name!r}: no node named {item!r} yet")
            return item
        node = self._wrapped.get(id(item))
        if node is None:
            node = as_node(item)
            self._wrapped[id(item)] = node
        known = self.nodes.setdefault(node.name, node)
        if known is not node:
            raise GraphError(f"workflow {self.name!r}: two different nodes named {node.name!r}")
        return node.name

    def _connect(self, source: str, target: str, route: str | None) -> None:
        if target == START:
            raise GraphError(f"workflow {self.name!r}: START cannot be an edge target")
        edge = Edge(source, target, route)
        if edge in self._out[source]:
            return
        self.edges.append(edge)
        self._out[source].append(edge)
        if source not in self.predecessors[target]:
            self.predecessors[target].append(source)

    def successors(self, source: str, route: str | None) -> list[BaseNode]:
        """Targets of the edges that fire: unrouted ones always, routed ones on a match."""
        return [
            self.nodes[e.target]
            for e in self._out.get(source, ())
            if e.route is None or e.route == route
        ]

    def is_terminal(self, name: str) -> bool:
        return not self._out.get(name)

    def graph(self) -> dict[str, Any]:
        """A JSON-ready description of the graph (nodes with their kind, and edges)."""
        return {
            "name": self.name,
            "nodes": [
                {"name": START, "kind": "start"},
                *({"name": n.name, "kind": node_kind(n)} for n in self.nodes.values()),
            ],
            "edges": [
                {"source": e.source, "target": e.target, "route": e.route} for e in self.edges
            ],
        }

    async def run(self, ctx: Context, node_input: Any) -> None:
        await _Scheduler(self, ctx).run(node_input)


def node_kind(node: BaseNode) -> str:
    if isinstance(node, Workflow):
        return "workflow"
    if isinstance(node, JoinNode):
        return "join"
    if isinstance(node, ParallelWorker):
        return "parallel_worker"
    return "node"


class _Scheduler:
    """Drives one workflow node run: dispatches triggered children, resumes waiting ones,
    and on re-entry continues from the children's checkpoints."""

    def __init__(self, workflow: Workflow, ctx: Context) -> None:
        self.workflow = workflow
        self.ctx = ctx
        self.execution = ctx._execution
        self.tasks: dict[asyncio.Future[Context], BaseNode] = {}
        self.task_paths: dict[asyncio.Future[Context], str] = {}
        # Child runs triggered and not started yet: (node, input, run_id).
        self.starting: list[tuple[BaseNode, Any, int]] = []
        self.open_joins: dict[str, str] = {}  # join name -> path of its collecting run
        # Finished child tasks, in completion order (waiting on all tasks at each step
        # would make a wide fan-out quadratic); made with the first task.
        self.finished: asyncio.Queue[asyncio.Future[Context]] | None = None

    async def run(self, node_input: Any) -> None:
        existing = self.execution.children.get(self.ctx.path)
        if existing:
            self._reenter(list(existing))
        else:
            for target in self.workflow.successors(START, None):
                self._dispatch(target, node_input, START, None)
        try:
            while self.starting or self.tasks:
                if len(self.starting) == 1 and not self.tasks:
                    # The only work there is: run it in this task (a task per child
                    # costs trips through the event loop).
                    await self._run_inline(*self.starting.pop())
                    continue
                if self.finished is None:
                    self.finished = asyncio.Queue()
                for node, value, run_id in self.starting:
                    self._spawn(node, value, run_id, self.finished)
                self.starting.clear()
                task = await self.finished.get()
                if task in self.tasks:
                    self._settle(task)
        except BaseException:
            # A failure is raised only after siblings that finished meanwhile (their done
            # callbacks may still be queued) have dispatched their downstream.
            for task in [t for t in self.tasks if t.done() and not t.cancelled()]:
                if task.exception() is None:
                    self._settle(task)
            await self._cancel_all()
            raise
        if self.open_joins and not self.ctx.interrupt_ids:
            raise GraphError(self._unfired_joins())

    async def _run_inline(self, node: BaseNode, value: Any, run_id: int) -> None:
        child = await run_isolated(run_child(self.ctx, node, value, run_id))
        if child.status == NodeStatus.COMPLETED:
            self._completed(node, child)

    def _settle(self, task: asyncio.Future[Context]) -> None:
        """Take a finished child task off the books; a completed child fires its edges."""
        node = self.tasks.pop(task)
        del self.task_paths[task]
        child = task.result()  # re-raises the child's failure
        if child.status == NodeStatus.COMPLETED:
            self._completed(node, child)

    def _reenter(self, paths: list[str]) -> None:
        for path in paths:
            state = self.execution.node_runs[path]
            node = self.workflow.nodes.get(state.name)
            if node is None:
                raise DefinitionChangedError(
                    f"workflow {self.workflow.name!r} no longer has a node {state.name!r} "
                    f"(stored run {path})"
                )
            if state.status in (NodeStatus.COMPLETED, NodeStatus.SUPERSEDED):
                continue
            if isinstance(node, JoinNode) and state.status == NodeStatus.PENDING:
                self._collect(node, path, state)
            else:
                self._start(node, state.input, state.run_id)

    def _unfired_joins(self) -> str:
        """Why the workflow cannot finish: joins some of whose predecessors never ran
        (typically a predecessor behind a route that was not taken)."""
        parts = []
        for name, path in self.open_joins.items():
            arrived = self.execution.node_runs[path].input
            missing = [p for p in self.workflow.predecessors[name] if p not in arrived]
            parts.append(f"join {name!r} never got input from {', '.join(missing)}")
        return f"workflow {self.workflow.name!r} cannot finish: " + "; ".join(parts)

    def _completed(self, node: BaseNode, child: Context) -> None:
        if self.workflow.is_terminal(node.name) and child.output is not None:
            if self.ctx.output is not None:
                raise NodeOutputError(
                    f"workflow {self.workflow.name!r} got a second terminal output, "
                    f"from {child.path}"
                )
            self.ctx.output = child.output
            own = self.execution.node_runs[self.ctx.path]
            self.execution.save(self.ctx.path, copied(own, output=child.output))
        for target in self.workflow.successors(node.name, child.route):
            self._dispatch(target, child.output, node.name, child.path)

    def _dispatch(self, target: BaseNode, value: Any, source: str, cause: str | None) -> None:
        """A fresh trigger: a new run_id, saved PENDING in the same batch as its cause
        (the path of the run whose output triggered it: its lineage, DESIGN 3.8)."""
        if isinstance(target, JoinNode):
            path = self.open_joins.get(target.name)
            state = self.execution.node_runs[path] if path else None
            if state is None or source in state.input:
                state = self._new_child(target, {}, {})
            path = child_path(self.ctx.path, target.name, state.run_id)
            lineage = dict(state.triggered_by) if isinstance(state.triggered_by, dict) else {}
            if cause is not None:
                lineage[source] = cause
            state = replace(state, input={**state.input, source: value}, triggered_by=lineage)
            self.execution.save(path, state)
            self._collect(target, path, state)
            return
        state = self._new_child(target, value, cause)
        self._start(target, value, state.run_id)

    def _new_child(
        self, node: BaseNode, value: Any, cause: str | dict[str, str] | None
    ) -> NodeRunState:
        run_id = self.execution.next_run_id(self.ctx.path, node.name)
        state = NodeRunState(
            NodeStatus.PENDING,
            run_id,
            name=node.name,
            parent_path=self.ctx.path,
            input=value,
            triggered_by=cause,
        )
        self.execution.save(child_path(self.ctx.path, node.name, run_id), state)
        return state

    def _collect(self, join: JoinNode, path: str, state: NodeRunState) -> None:
        predecessors = self.workflow.predecessors[join.name]
        if len(state.input) == len(predecessors):  # inputs are keyed by predecessor
            self.open_joins.pop(join.name, None)
            inputs = {p: state.input[p] for p in predecessors}
            self.execution.save(path, replace(state, input=inputs))
            self._start(join, inputs, state.run_id)
        else:
            self.open_joins[join.name] = path

    def _start(self, node: BaseNode, value: Any, run_id: int) -> None:
        self.starting.append((node, value, run_id))

    def _spawn(
        self,
        node: BaseNode,
        value: Any,
        run_id: int,
        finished: asyncio.Queue[asyncio.Future[Context]],
    ) -> None:
        task = self.execution.spawn(run_child(self.ctx, node, value, run_id))
        task.add_done_callback(finished.put_nowait)
        self.tasks[task] = node
        self.task_paths[task] = child_path(self.ctx.path, node.name, run_id)

    async def _cancel_all(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        unstarted = [child_path(self.ctx.path, n.name, r) for n, _, r in self.starting]
        for path in [*self.task_paths.values(), *unstarted]:
            # A run dispatched but cancelled before its runner started is cancelled too.
            state = self.execution.node_runs.get(path)
            if state is not None and state.status == NodeStatus.PENDING:
                self.execution.save(path, replace(state, status=NodeStatus.CANCELLED))
                self.execution.record(
                    Event(
                        author=state.name,
                        path=path,
                        run_id=state.run_id,
                        status=NodeStatus.CANCELLED,
                    )
                )
        self.tasks.clear()
        self.task_paths.clear()
        self.starting.clear()
