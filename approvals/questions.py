"""What the decision page works out about a question besides its form: whose vote the
user would cast, the assignees typed to hand it over, the link to its invocation."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import quote
from django.urls import reverse

from workflows.audit import actions
from workflows.engine.errors import AlreadyDecidedError
from workflows.models import AuditEntry, Interrupt
from workflows.policy import voting_for


def vote_of(user: Any, interrupt: Interrupt) -> Any:
    """The delegation through which `user` would answer `interrupt` (None: as themselves,
    or with no vote left, which the service says when they try)."""
    voted = interrupt.decisions.filter(round=interrupt.round).values_list(
        "actor_id", "on_behalf_of_id"
    )
    try:
        return voting_for(user, interrupt, [pk for pair in voted for pk in pair])
    except AlreadyDecidedError:
        return None


def assignee_list(text: str) -> list[str]:
    """The assignees typed in the reassign box: one per line or comma separated."""
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def monitor_url(invocation_id: Any) -> str:
    return reverse("admin:workflows_invocation_change", args=[quote(invocation_id)])


def replaced_decisions(interrupt: Interrupt, decisions: list[Any]) -> set[Any]:
    """The ids of `decisions` whose answer a later change (DESIGN 3.8) replaced: given in an
    earlier round, or before the question's last rewind (one read for them all)."""
    last_change = (
        AuditEntry.objects.filter(interrupt_id=interrupt.pk, action=actions.ANSWER_REWOUND)
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    return {
        d.pk
        for d in decisions
        if d.round < interrupt.round or (last_change is not None and d.created_at < last_change)
    }
