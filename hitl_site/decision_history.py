"""Decided questions of the weeks before the demo, for the approvals dashboard: `seed_demo`
asks and answers them through the services, then dates each question and its decision
back (a demo cannot wait weeks). Three approvers who differ: `approver` approves every
expense within seconds (the dashboard flags a possible rubber stamp), `approver2` takes
minutes to hours and rejects some, `admin` reviews documents over a day or two.
"""

from datetime import timedelta
from typing import Any

from django.utils import timezone

from workflows import services
from workflows.models import Decision, Interrupt, Invocation

# (approver, workflow, node asked, seconds from asking to deciding, approved).
QUICK = [("approver", "expense_approval", "manager_approval", 2 + n % 7, True) for n in range(24)]
# The quick approver decides most days: 22 of their decisions in the last 30 days, enough
# (RUBBER_STAMP_MIN_DECISIONS, 20) for the default 30-day view to flag them as well as the
# 90-day one; the last two further back.
QUICK_RECENT = 22
CAREFUL = [
    ("approver2", "expense_approval", "manager_approval", seconds, approved)
    for seconds, approved in (
        (340, True),
        (1500, False),
        (2700, True),
        (5400, True),
        (900, True),
        (21600, False),
        (4200, True),
        (600, True),
        (12600, True),
        (7800, False),
        (1200, True),
        (3000, True),
    )
]
REVIEWS = [
    ("admin", "document_drafting", "review", hours * 3600, True) for hours in (20, 30, 44, 26, 52)
]
HISTORY = QUICK + CAREFUL + REVIEWS
# Each history invocation's idempotency key starts with this: what tells them apart.
KEY_PREFIX = "demo-history-"
PERIOD_DAYS = 80  # decided over this many days before today, spread so 7/30/90 days differ


def _input(workflow: str, index: int) -> dict:
    if workflow == "expense_approval":  # over the limit asked about, under the large one
        return {"employee": f"Employee {index}", "amount": 150.0 + 10 * index, "purpose": "travel"}
    return {"title": f"Policy note {index}", "brief": "a short internal note"}


def _days_back(index: int) -> int:
    if index < QUICK_RECENT:  # spread over the last 28 days
        return index * 28 // QUICK_RECENT
    if index < len(QUICK):
        return 45 + 25 * (index - QUICK_RECENT)
    # Each a different day back; neighbours far apart, so every approver spans the period.
    return (index * 37) % PERIOD_DAYS


def seed_decision_history(users: dict[str, Any]) -> None:
    now = timezone.now()
    for index, (username, workflow, node, seconds, approved) in enumerate(HISTORY):
        invocation: Invocation = services.start(
            workflow,
            _input(workflow, index),
            user=users["admin"],
            idempotency_key=f"{KEY_PREFIX}{index}",
        )
        question = invocation.interrupts.get(status="pending", path__contains=f"/{node}@")
        comment = "" if approved else "not within policy"
        services.decide(
            question.id,
            {"approved": approved, "comment": comment},
            actor=users[username],
            comment=comment,
        )
        decided_at = now - timedelta(days=_days_back(index), hours=1)
        Decision.objects.filter(interrupt=question.id).update(created_at=decided_at)
        Interrupt.objects.filter(pk=question.id).update(
            created_at=decided_at - timedelta(seconds=seconds), resolved_at=decided_at
        )
