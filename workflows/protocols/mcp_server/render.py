"""An outcome as the caller's protocol shows it: an `input_required` round with elicitation
forms (2026-07-28), a task (the Tasks extension), or text with the question and its link
(a client of 2025-11-25, or a question MCP's forms cannot carry)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from mcp.server.context import ServerRequestContext
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CallToolResult,
    InputRequiredResult,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...engine.status import NodeStatus
from . import state
from .forms import elicitation, question_text
from .outcome import Outcome

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 2000


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _capabilities(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The client capabilities a 2026-07-28 request declares (none on an older one)."""
    if not is_modern(ctx) or not ctx.meta:
        return {}
    declared: Any = ctx.meta.get(CLIENT_CAPABILITIES_META_KEY)
    return declared if isinstance(declared, dict) else {}


def wants_task(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared the Tasks extension in this request's capabilities."""
    return TASKS_EXTENSION in (_capabilities(ctx).get("extensions") or {})


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client shows elicitation forms (an empty `elicitation` means forms)."""
    elicitation = _capabilities(ctx).get("elicitation")
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)


def input_requests(outcome: Outcome) -> dict[str, Any]:
    """The elicitation form of each question the caller may answer and MCP can carry,
    keyed by the question's id."""
    found = {}
    for question in outcome.questions:
        if question["answerable"]:
            form = elicitation(question)
            if form is not None:
                found[question["id"]] = form
    return found


def summary(outcome: Outcome) -> str:
    lines = [f"Invocation {outcome.invocation_id} of {outcome.workflow}"]
    if outcome.visible:
        lines[0] += f": {outcome.status}"
        if outcome.status == NodeStatus.COMPLETED:
            lines.append("Output: " + json.dumps(outcome.output, cls=DjangoJSONEncoder))
        if outcome.error:
            lines.append(f"Error: {outcome.error}")
    for question in outcome.questions:
        lead = "Waiting for your answer:" if question["answerable"] else "Waiting for others:"
        lines.append(f"{lead}\n{question_text(question)}")
    if outcome.visible and not outcome.settled:
        lines.append("Still running: call get_invocation to see where it stands.")
    return "\n\n".join(lines)


def text_result(outcome: Outcome, *, note: str = "") -> CallToolResult:
    text = summary(outcome) if not note else f"{note}\n\n{summary(outcome)}"
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=outcome.as_json(),
        is_error=outcome.visible and outcome.status == NodeStatus.FAILED,
    )


def tool_result(
    ctx: ServerRequestContext[Any, Any], user: Any, outcome: Outcome, *, note: str = ""
) -> CallToolResult | InputRequiredResult:
    """`input_required` with the forms and a fresh requestState when the caller may answer
    and shows forms (2026-07-28); else the text result."""
    requests = input_requests(outcome) if can_elicit(ctx) else {}
    if not requests:
        return text_result(outcome, note=note)
    minted = state.mint(user, outcome.invocation_id, list(requests))
    return InputRequiredResult(input_requests=requests, request_state=minted)


def _timestamp(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


TASK_STATUS = {
    NodeStatus.COMPLETED: "completed",
    NodeStatus.FAILED: "failed",
    NodeStatus.CANCELLED: "cancelled",
}


def task(outcome: Outcome, *, full: bool, forms: bool) -> dict[str, Any]:
    """The invocation as a task (its id is the task id, stable for the task's life);
    `full` adds what tasks/get carries: the forms (when the client shows `forms`), the
    result or the error."""
    requests = input_requests(outcome) if forms else {}
    status = TASK_STATUS.get(
        NodeStatus(outcome.status), "input_required" if requests else "working"
    )
    shown: dict[str, Any] = {
        "taskId": outcome.invocation_id,
        "status": status,
        "statusMessage": summary(outcome),
        "createdAt": _timestamp(outcome.created_at),
        "lastUpdatedAt": _timestamp(outcome.updated_at),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if not full:
        return shown
    if status == "input_required":
        shown["inputRequests"] = {
            key: form.model_dump(mode="json", by_alias=True, exclude_none=True)
            for key, form in requests.items()
        }
    elif status == "completed":
        shown["result"] = text_result(outcome).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    elif status == "failed":
        shown["error"] = {"code": -32603, "message": outcome.error or "the workflow failed"}
    return shown
