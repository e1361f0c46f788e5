"""The invocation monitor's pages as plain functions of the records and the viewing user:
what the invocation page, the cancel confirmation and the workflow pages show. No request
needed, so each is testable on its own; the admin classes only render them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Prefetch, Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from ..engine.status import InterruptStatus, NodeStatus
from ..graph import with_statuses, workflow_graph
from ..models import OPEN_STATUSES, Decision, Interrupt, Invocation, NodeRun, SessionEvent
from ..registry import registry
from .display import definition_graph, human_duration, pretty_json, question_url


def node_run_rows(node_runs: Iterable[NodeRun], now: datetime) -> list[dict[str, Any]]:
    rows = []
    for run in node_runs:
        final = NodeStatus(run.status).is_final
        rows.append(
            {
                "run": run,
                "depth": run.path.count("/"),
                "segment": run.path.rpartition("/")[2],
                "duration": human_duration((run.updated_at if final else now) - run.created_at),
                "open": not final,
                "output": None if run.output is None else pretty_json(run.output),
                "superseded": run.status == NodeStatus.SUPERSEDED,
                "lineage": lineage(run.triggered_by, run.path),
            }
        )
    return rows


def lineage(triggered_by: Any, path: str) -> list[tuple[str, str]]:
    """The runs whose output triggered the run at `path` (DESIGN 3.8): one, a join's
    predecessors in their order, or none (fed by START, or a dynamic child). Each as (its
    path from the run's workflow, as the table's indented names read; its whole path)."""
    paths = triggered_by.values() if isinstance(triggered_by, dict) else [triggered_by]
    scope = path.rpartition("/")[0] + "/"
    return [(str(p).removeprefix(scope), str(p)) for p in paths if p]


def by_path(rows: Iterable[Any]) -> dict[str, list[Any]]:
    """Rows of a node run (effects, grant uses) by the node run's path."""
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row.path, []).append(row)
    return grouped


def event_rows(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    """Each event with its number (its position among the invocation's events, from 1),
    its time and what it carried, as (label, text) pairs; a changed answer names the
    number of the event it replaces."""
    rows = []
    first: float | None = None
    for position, event in enumerate(events):
        first = event.timestamp if first is None else first
        carried = []
        if event.output is not None:
            carried.append(("output", pretty_json(event.output)))
        if event.route:
            carried.append(("route", event.route))
        for call in event.function_calls:
            args = pretty_json(call.get("args"))
            carried.append((f"function call {call.get('name')} ({call.get('id')})", args))
        if event.long_running_tool_ids:
            carried.append(("waits for", ", ".join(event.long_running_tool_ids)))
        for response in event.function_responses:
            label = f"answer to {response.get('id')}"
            carried.append((label, pretty_json(response.get("response"))))
        if event.error:
            carried.append(("error", event.error))
        rows.append(
            {
                "event": event,
                "time": datetime.fromtimestamp(event.timestamp, tz=UTC),
                "offset": human_duration(timedelta(seconds=event.timestamp - first)),
                "carried": carried,
                "number": position + 1,
                "replaces": None if event.replaces is None else event.replaces + 1,
            }
        )
    return rows


def monitor_graph(
    invocation: Invocation, node_runs: list[NodeRun], pending: list[Interrupt]
) -> dict[str, Any] | None:
    """The invocation's graph with statuses; waiting nodes link to their question (each
    pending interrupt carries its `url`)."""
    graph = definition_graph(invocation.workflow_name, invocation.workflow_version)
    if graph is None:
        return None
    graph = with_statuses(graph, node_runs)
    url_by_path = {interrupt.path: interrupt.url for interrupt in pending}
    for node in graph["nodes"]:
        for target in [node, *node["items"]]:
            if target["status"] == NodeStatus.WAITING and target["path"] in url_by_path:
                target["url"] = url_by_path[target["path"]]
    return graph


def invocation_page(
    invocation: Invocation, user: Any, *, may_cancel: bool, may_retry: bool = False
) -> dict[str, Any]:
    """What the invocation's page shows `user`: the graph with statuses, the node runs with
    the questions they wait for, every question linked to where `user` may go with it, the
    event timeline, and whether to offer cancelling and retrying (`may_cancel`,
    `may_retry`: the user's permissions)."""
    node_runs = list(invocation.node_runs.order_by("id"))
    decisions = Decision.objects.select_related("actor").order_by("id")
    interrupts = list(
        invocation.interrupts.select_related("resolved_by")
        .prefetch_related(Prefetch("decisions", queryset=decisions))
        .order_by("created_at", "id")
    )
    pending = [i for i in interrupts if i.status == InterruptStatus.PENDING]
    for interrupt in interrupts:
        interrupt.invocation = invocation  # the four-eyes rule reads who started it
        interrupt.url = question_url(interrupt, user)
        interrupt.response_json = (
            None if interrupt.response is None else pretty_json(interrupt.response)
        )
    rows = node_run_rows(node_runs, timezone.now())
    by_id = {interrupt.id: interrupt for interrupt in interrupts}
    effects = by_path(invocation.effects.order_by("id"))
    grant_uses = by_path(invocation.grant_uses.select_related("grant"))
    for row in rows:  # a waiting run links its questions, named by what they ask
        row["waits_for"] = [by_id[i] for i in row["run"].interrupt_ids or [] if i in by_id]
        row["effects"] = effects.get(row["run"].path, [])
        row["grant_uses"] = grant_uses.get(row["run"].path, [])
    return {
        "graph": monitor_graph(invocation, node_runs, pending),
        "statuses": [status.value for status in NodeStatus],
        "node_run_rows": rows,
        "interrupts": interrupts,
        "event_rows": event_rows(invocation.events.order_by("id")),
        "can_cancel": invocation.status in OPEN_STATUSES and may_cancel,
        "can_retry": invocation.status == NodeStatus.FAILED and may_retry,
    }


def cancel_summary(invocations: Iterable[Invocation]) -> list[dict[str, Any]]:
    """What cancelling each invocation does: open node runs stop, pending questions close."""
    summary = []
    for invocation in invocations:
        summary.append(
            {
                "invocation": invocation,
                "cancellable": invocation.status in OPEN_STATUSES,
                "node_runs": [r for r in invocation.node_runs.all() if r.status in OPEN_STATUSES],
                "questions": [
                    i for i in invocation.interrupts.all() if i.status == InterruptStatus.PENDING
                ],
            }
        )
    return summary


INVOCATION_COUNTS = {
    "total": Count("id"),
    "waiting": Count("id", filter=Q(status=NodeStatus.WAITING)),
}


def registered_workflows() -> list[dict[str, Any]]:
    """Every registered workflow with its graph and how many invocations it has (and how
    many of them wait)."""
    counts = {
        row["workflow_name"]: row
        for row in Invocation.objects.values("workflow_name").annotate(**INVOCATION_COUNTS)
    }
    return [
        {
            "definition": definition,
            "graph": workflow_graph(definition.workflow),
            "counts": counts.get(definition.name, {"total": 0, "waiting": 0}),
        }
        for definition in registry.definitions()
    ]


def registered_workflow(name: str) -> dict[str, Any]:
    """The latest registered version of workflow `name`, as `registered_workflows` lists
    it; UnknownWorkflowError when none is registered."""
    definition = registry.get(name)
    return {
        "definition": definition,
        "graph": workflow_graph(definition.workflow),
        "counts": Invocation.objects.filter(workflow_name=name).aggregate(**INVOCATION_COUNTS),
    }


def stream_url(invocation: Invocation) -> str | None:
    """The live stream the page follows while the invocation is open (None once final,
    or where the host does not mount the API)."""
    if NodeStatus(invocation.status).is_final:
        return None
    try:
        return reverse("workflows-api:invocation-stream", args=[invocation.pk])
    except NoReverseMatch:
        return None
