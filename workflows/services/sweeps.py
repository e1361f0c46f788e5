"""The periodic sweeps of the write path (`workflows.schedule` lists when they run):

- `escalate_interrupts` (DESIGN 4.3): each due step of a pending question's ladder applied
  exactly once, in order, never after the question is answered;
- `expire_overdue_interrupts`: each pending interrupt past its deadline expired once and
  its on_timeout policy applied;
- `recover_stalled`: stalled invocations re-enqueued.

The first two share a structure: one transaction per interrupt, a bounded batch per
sweep, a failure logged and left for the next sweep. `services` re-exports all three."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from .. import dispatch
from ..audit import actions, trail
from ..audit.canonical import timestamp
from ..conf import hitl_settings
from ..engine.errors import ResponseValidationError
from ..engine.events import DefaultResponse
from ..engine.status import InterruptStatus
from ..engine.transitions import expire_batch
from ..inbox import asked_at, step_due_at
from ..models import Interrupt, Invocation
from ..signals import interrupt_escalated, send_on_commit
from ..transactions import store, write_transaction
from .claims import hand_over, locked_interrupt

logger = logging.getLogger(__name__)

# Interrupts per sweep (the most overdue first); the rest wait for the next sweep.
SWEEP_BATCH = 500


def escalate_interrupts(now: datetime | None = None) -> int:
    """Apply every escalation step due by `now` (default: now) of the pending interrupts;
    the number of steps applied. Several overdue steps of one interrupt apply in their
    order, each audited and signalled."""
    now = now or timezone.now()
    due = Interrupt.objects.filter(
        status=InterruptStatus.PENDING, next_escalation_at__lte=now
    ).order_by("next_escalation_at")
    applied = 0
    for interrupt_id in due.values_list("id", flat=True)[:SWEEP_BATCH]:
        try:
            applied += _escalate(interrupt_id, now)
        except Exception:
            logger.exception("escalating interrupt %s", interrupt_id)
    return applied


@write_transaction
def _escalate(interrupt_id: str, now: datetime) -> int:
    # The answer path's locks in its order (the invocation row, then the interrupt row):
    # an answer racing a step commits wholly before it (the step then sees the question
    # answered) or after it; a second sweep waits here and finds the step applied.
    interrupt = locked_interrupt(interrupt_id)
    applied = 0
    while _next_step_due(interrupt, now):
        _apply_step(interrupt)
        applied += 1
    return applied


def _next_step_due(interrupt: Interrupt, now: datetime) -> bool:
    return (
        interrupt.status == InterruptStatus.PENDING
        and interrupt.next_escalation_at is not None
        and interrupt.next_escalation_at <= now
        and interrupt.escalation_step < len(interrupt.escalation)
    )


def _apply_step(interrupt: Interrupt) -> None:
    """Apply the interrupt's next step (locked, pending, due), audit it and signal it once
    the transaction commits."""
    ladder, index = interrupt.escalation, interrupt.escalation_step
    step = ladder[index]
    asked = asked_at(interrupt)  # before the step moves next_escalation_at on
    changed = ["escalation_step", "next_escalation_at"]
    if step.get("assignees"):
        action = actions.INTERRUPT_ESCALATED
        data = _hand_over(interrupt, step["assignees"])
        changed += ["assignees", "claimed_by", "claimed_at"]
    else:
        action, data = actions.INTERRUPT_REMINDED, {"assignees": interrupt.assignees}
    interrupt.escalation_step = index + 1
    following = ladder[index + 1] if index + 1 < len(ladder) else None
    interrupt.next_escalation_at = None if following is None else step_due_at(asked, following)
    interrupt.save(update_fields=changed)
    trail.record(action, interrupt=interrupt, data={"step": index, **data})
    send_on_commit(interrupt_escalated, sender=Interrupt, interrupt_id=interrupt.pk, step=index)


def _hand_over(interrupt: Interrupt, assignees: list[str]) -> dict[str, Any]:
    """Hand the question over as reassigning does (`claims.hand_over`), and what the
    audit entry says about it.

    New assignees that name a user or group that does not exist, or cannot reach the
    quorum, would leave the question nobody's to answer: the current assignees keep it
    instead, and the entry says why (`refused`)."""
    try:
        return hand_over(interrupt, assignees)
    except ResponseValidationError as exc:
        logger.warning("interrupt %s: escalation keeps its assignees: %s", interrupt.pk, exc)
        kept = interrupt.assignees
        return {"assignees": kept, "previous": kept, "refused": exc.message}


def expire_overdue_interrupts(now: datetime | None = None) -> int:
    """Expire each pending interrupt past its deadline exactly once and apply its policy.

    Each interrupt in a transaction of its own: one that fails is logged and left for the
    next sweep, the others go on. The fail policy waits while a run holds the lease (that
    run decides the invocation's outcome; the next sweep applies it)."""
    now = now or timezone.now()
    overdue = Interrupt.objects.filter(status=InterruptStatus.PENDING, deadline__lte=now)
    expired = 0
    for interrupt_id, invocation_id in overdue.values_list("id", "invocation_id")[:500]:
        try:
            expired += _expire(interrupt_id, invocation_id, now)
        except Exception:
            logger.exception("expiring interrupt %s of invocation %s", interrupt_id, invocation_id)
    return expired


@write_transaction
def _expire(interrupt_id: str, invocation_id: Any, now: datetime) -> int:
    db = store()
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    record = checkpoint.interrupts.get(interrupt_id) if checkpoint else None
    if checkpoint is None or record is None or record.status != InterruptStatus.PENDING:
        return 0  # answered or expired meanwhile
    fails = not isinstance(record.request.on_timeout, DefaultResponse)
    if fails and Invocation.objects.leased().filter(pk=invocation_id).exists():
        return 0
    db.commit_sync(expire_batch(checkpoint, interrupt_id, now))
    applied = {"policy": "fail"}
    if not fails:
        applied = {"policy": "default_response", "response": record.request.on_timeout.response}
    deadline = timestamp(record.deadline) if record.deadline else None
    trail.record(
        actions.INTERRUPT_EXPIRED, interrupt=record, data={"deadline": deadline, **applied}
    )
    dispatch.enqueue_run(invocation_id)
    return 1


def recover_stalled(now: datetime | None = None) -> int:
    """Re-enqueue the stalled invocations (see `InvocationQuerySet.stalled`). Each once
    until a run takes it (or again after HITL["STALLED_AFTER_SECONDS"], should that
    message be lost), so a backlog does not flood the broker."""
    now = now or timezone.now()
    period = timedelta(seconds=hitl_settings.STALLED_AFTER_SECONDS)
    not_recently = Q(recovery_enqueued_at__isnull=True) | Q(recovery_enqueued_at__lt=now - period)
    stalled = Invocation.objects.stalled(now, period).filter(not_recently)
    invocation_ids = set(stalled.values_list("pk", flat=True)[:1000])
    Invocation.objects.filter(pk__in=invocation_ids).update(recovery_enqueued_at=now)
    for invocation_id in invocation_ids:
        dispatch.send_run(invocation_id)
    return len(invocation_ids)
