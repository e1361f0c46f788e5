"""Reading an interrupt's escalation ladder as stored (DESIGN 4.3): when each step is due,
what it does, and a one-line summary for the pages a person looks at. The sweep that
applies the steps is `escalation`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.timesince import timeuntil

from ..audit.actions import INTERRUPT_ESCALATED, INTERRUPT_REASSIGNED
from ..models import AuditEntry, Interrupt


def asked_at(interrupt: Interrupt) -> datetime:
    """When the question was asked, the time its steps count from. The next step's due
    time was computed from it when the question was asked (the store) or a step applied
    (the sweep), so it gives the exact asked time back; without a next step, the row's
    creation time (the same instant, to the commit)."""
    ladder = interrupt.escalation
    if interrupt.next_escalation_at is not None and interrupt.escalation_step < len(ladder):
        after = timedelta(seconds=ladder[interrupt.escalation_step]["after"])
        return interrupt.next_escalation_at - after
    return interrupt.created_at


def step_due_at(asked: datetime, step: dict[str, Any]) -> datetime:
    return asked + timedelta(seconds=step["after"])


def step_action(step: dict[str, Any]) -> str:
    """What a step does, in words: "remind the assignees", "hand over to group:x", or both."""
    actions = []
    if step.get("remind"):
        actions.append("remind the assignees")
    if step.get("assignees"):
        actions.append(f"hand over to {', '.join(step['assignees'])}")
    return " and ".join(actions)


def ladder_summary(interrupt: Interrupt, now: datetime | None = None) -> str:
    """One line on where the question stands on its escalation ladder ("" without one):
    the steps applied so far, and while it is pending the next step, what and when:
    "1 of 2 steps applied; next: hand over to group:directors, in 19 hours (...)"."""
    ladder = interrupt.escalation
    if not ladder:
        return ""
    applied = interrupt.escalation_step
    summary = f"{applied} of {len(ladder)} step{'s' if len(ladder) != 1 else ''} applied"
    if interrupt.status != "pending" or applied >= len(ladder):
        return summary + ("" if applied < len(ladder) else "; none left")
    due = interrupt.next_escalation_at or step_due_at(asked_at(interrupt), ladder[applied])
    now = now or timezone.now()
    when = f"in {timeuntil(due, now, depth=1)}" if due > now else "now (the next sweep)"
    local = date_format(timezone.localtime(due), "DATETIME_FORMAT")
    return f"{summary}; next: {step_action(ladder[applied])}, {when} ({local})"


@dataclass(frozen=True)
class Handover:
    """A time the question changed hands: from `previous` to `assignees` (empty: anyone
    who may answer), at `at`, by a person reassigning it (`by`) or by its ladder's `step`."""

    previous: list[str]
    assignees: list[str]
    at: datetime
    by: str
    step: int | None


def handovers(interrupt: Interrupt) -> list[Handover]:
    """Each time the question was escalated to others or reassigned, oldest first, as the
    audit trail recorded it (an escalation that kept the assignees is left out)."""
    entries = AuditEntry.objects.filter(
        interrupt_id=interrupt.pk, action__in=(INTERRUPT_ESCALATED, INTERRUPT_REASSIGNED)
    ).order_by("id")
    return [
        Handover(
            previous=entry.data.get("previous") or [],
            assignees=entry.data.get("assignees") or [],
            at=entry.created_at,
            by=entry.actor_name if entry.action == INTERRUPT_REASSIGNED else "",
            step=entry.data.get("step") if entry.action == INTERRUPT_ESCALATED else None,
        )
        for entry in entries
        if "refused" not in entry.data
    ]
