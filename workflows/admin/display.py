"""What the admin pages show, apart from the admin classes: links to where a question is
answered, short ids, JSON blocks, durations, and a registered workflow's graph."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.admin.utils import quote
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from ..engine.status import InterruptStatus
from ..graph import workflow_graph
from ..models import Interrupt, Invocation
from ..policy import REWIND_PERMISSION, answer_policy
from ..registry import UnknownWorkflowError, registry

# Where a pending question links to: the approvals inbox's decision page when that app is
# installed, else the read-only interrupt page of this admin.
DECISION_URL_NAMES = ["admin:approvals_pendingapproval_change", "admin:workflows_interrupt_change"]


def decision_url(interrupt_id: str) -> str | None:
    """The page where a person answers a pending interrupt."""
    for name in DECISION_URL_NAMES:
        try:
            return reverse(name, args=[quote(interrupt_id)])
        except NoReverseMatch:
            continue
    return None


def answer_url(interrupt: Interrupt, user: Any) -> str | None:
    """The decision page of `interrupt` while `user` may answer it (the answer policy says
    so and they have not decided yet), else None."""
    decided = any(decision.actor_id == user.pk for decision in interrupt.decisions.all())
    if (
        interrupt.status == InterruptStatus.PENDING
        and not decided
        and answer_policy().can_answer(user, interrupt)
    ):
        return decision_url(interrupt.id)
    return None


# "Change this answer" (DESIGN 3.8): the approvals app's page, when it is installed.
REWIND_URL_NAME = "admin:approvals_pendingapproval_rewind"


def rewind_url(interrupt: Interrupt, user: Any) -> str | None:
    """Where `user` changes the answer to `interrupt`: None while it has no answer to
    change, when they may not (the permission and the answer rule), or with no page."""
    answered = interrupt.status == InterruptStatus.RESOLVED or (
        interrupt.status == InterruptStatus.EXPIRED and interrupt.response is not None
    )
    if not answered or not user.has_perm(REWIND_PERMISSION, interrupt):
        return None
    try:
        return reverse(REWIND_URL_NAME, args=[quote(interrupt.id)])
    except NoReverseMatch:
        return None


def question_url(interrupt: Interrupt, user: Any) -> str:
    """Where the monitor links a question: its decision page while `user` may answer it,
    else its read-only record."""
    return answer_url(interrupt, user) or reverse(
        "admin:workflows_interrupt_change", args=[quote(interrupt.id)]
    )


def short_id(obj: Invocation | Interrupt) -> str:
    """A UUID's first 8 characters: enough to tell rows apart, and a list stays narrow."""
    return str(obj.pk)[:8]


def question_cell(interrupt: Interrupt, *details: str) -> str:
    """A question in a list: its message, and `details` in small print beneath it (one
    column instead of several, so the list fits 1,280 px beside the admin's sidebars)."""
    return format_html(
        '{}<br><small class="quiet">{}</small>',
        Truncator(interrupt.message or f"answer {interrupt.pk}").chars(90),
        " · ".join(details),
    )


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_block(value: Any) -> str:
    """A JSON value as an indented block for a read-only page."""
    return format_html('<pre class="hitl-json">{}</pre>', pretty_json(value))


def human_duration(delta: timedelta) -> str:
    """'0.42 s', '12 s', '3 min 5 s', '2 h 3 min', '3 d 4 h'."""
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 10:
        return f"{seconds:.2f} s"
    whole = int(seconds)
    for unit, size, smaller, smaller_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            return f"{whole // size} {unit} {whole % size // smaller_size} {smaller}"
    return f"{whole} s"


def definition_graph(name: str, version: str | None = None) -> dict[str, Any] | None:
    """The graph of a registered workflow (a version the invocation ran on if it is still
    registered, else the latest), or None when no such workflow is registered."""
    try:
        definition = registry.get(name, version)
    except UnknownWorkflowError:
        try:
            definition = registry.get(name)
        except UnknownWorkflowError:
            return None
    return workflow_graph(definition.workflow)
