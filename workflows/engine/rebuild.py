"""Rebuild node-run state from session events alone, to check it against the checkpoint.

Leaves write an event for each outcome (status set); ancestors that only wait on or fail
through descendants write none, so their state is derived from their descendants.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .events import Event
from .state import NodeRunState
from .status import NodeStatus

COMPARED_STATUSES = {
    NodeStatus.WAITING,
    NodeStatus.COMPLETED,
    NodeStatus.FAILED,
    NodeStatus.CANCELLED,
    NodeStatus.SUPERSEDED,
}


def _segment(path: str) -> tuple[str, int]:
    name, _, run_id = path.rpartition("/")[2].partition("@")
    return name, int(run_id)


def rebuild_node_runs(
    events: list[Event], unapplied: Iterable[str] = ()
) -> dict[str, NodeRunState]:
    """Node-run state from events. `unapplied`: ids answered (a user event exists) that no
    node run has applied yet; the node that owns one still waits on it."""
    answered: set[str] = set()
    raised: dict[str, set[str]] = defaultdict(set)
    errors: dict[str, int] = defaultdict(int)
    # The last outcome of each node run: its status, output and route.
    outcome: dict[str, tuple[NodeStatus, Any, str | None]] = {}
    # Where each path raised its ids: a rewound answer takes back what its node run asked
    # after the answer it replaces (DESIGN 3.8).
    raised_at: dict[str, list[tuple[int, list[str]]]] = defaultdict(list)
    for index, event in enumerate(events):
        answered.update(r.id for r in event.function_responses)
        if event.rewound and event.replaces is not None:
            rewound = {r.id for r in event.function_responses}
            for at, asked in raised_at[event.path]:
                if at > event.replaces:
                    answered -= set(asked) - rewound
        if not event.path or event.function_responses:
            continue
        raised[event.path].update(event.long_running_tool_ids)
        raised_at[event.path].append((index, list(event.long_running_tool_ids)))
        errors[event.path] += bool(event.error)
        if event.status == NodeStatus.SUPERSEDED:
            # A rewind took the run out: its answers no longer count (a run raising one
            # of its ids again asks anew).
            answered -= raised[event.path]
        if event.status is not None:
            outcome[event.path] = (event.status, event.output, event.route)
    answered -= set(unapplied)
    paths: set[str] = set(raised)
    for path in list(paths):
        parts = path.split("/")
        paths.update("/".join(parts[:i]) for i in range(1, len(parts)))

    runs: dict[str, NodeRunState] = {}
    for path in sorted(paths, key=lambda p: -p.count("/")):  # descendants first
        name, run_id = _segment(path)
        children = [runs[p] for p in paths if p.rpartition("/")[0] == path]
        status, output, route = outcome.get(path) or (_derived_status(children), None, None)
        ids: set[str] = set()
        if status == NodeStatus.WAITING:
            ids = raised[path] - answered
            for child in children:
                ids |= child.interrupt_ids
        failed_itself = status == NodeStatus.FAILED and errors[path] > 0
        runs[path] = NodeRunState(
            status=status,
            run_id=run_id,
            output=output,
            interrupt_ids=ids,
            attempt=errors[path] if failed_itself else errors[path] + 1,
            name=name,
            parent_path=path.rpartition("/")[0],
            route=route,
        )
    return runs


def _derived_status(children: list[NodeRunState]) -> NodeStatus:
    statuses = {c.status for c in children}
    for status in (NodeStatus.FAILED, NodeStatus.WAITING, NodeStatus.CANCELLED):
        if status in statuses:
            return status
    return NodeStatus.RUNNING


def checkpoint_differences(
    events: list[Event], node_runs: dict[str, NodeRunState], unapplied: Iterable[str] = ()
) -> list[str]:
    """Where the checkpoint and the events disagree (empty when they agree). `unapplied`:
    the ids of accepted answers no node run consumed yet (see `rebuild_node_runs`)."""
    rebuilt = rebuild_node_runs(events, unapplied)
    problems: list[str] = []
    for path, state in node_runs.items():
        if state.status not in COMPARED_STATUSES:
            continue
        other = rebuilt.get(path)
        if other is None:
            problems.append(f"{path}: {state.status} in the checkpoint, absent from events")
            continue
        fields: dict[str, tuple[Any, Any]] = {
            "status": (state.status, other.status),
            "run_id": (state.run_id, other.run_id),
        }
        if state.status != NodeStatus.SUPERSEDED:  # a superseded run's attempts: history
            fields["interrupt_ids"] = (set(state.interrupt_ids), other.interrupt_ids)
            fields["attempt"] = (state.attempt, other.attempt)
        if other.output is not None or other.route is not None:
            fields["output"] = (state.output, other.output)
            fields["route"] = (state.route, other.route)
        for field, (stored, derived) in fields.items():
            if stored != derived:
                problems.append(f"{path}: {field} is {stored!r} stored, {derived!r} from events")
    for path, other in rebuilt.items():
        if other.status in COMPARED_STATUSES and path not in node_runs:
            problems.append(f"{path}: {other.status} from events, absent from the checkpoint")
    return problems
