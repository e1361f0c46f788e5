"""The inbox's one order: priority (urgent first), then due date (soonest first, none
last), then age (oldest first); the index `hitl_interrupt_inbox_order` is in this order."""

from django.db.models import F, OrderBy

INBOX_ORDER: tuple[OrderBy, ...] = (
    F("priority_rank").asc(),
    F("due_at").asc(nulls_last=True),
    F("created_at").asc(),
    F("id").asc(),  # a total order: pages never repeat or skip a row
)
