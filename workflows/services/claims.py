"""Claims and reassignment: who is working on a question and who may answer it, and the
interrupt-level checks the decisions share (the interrupt locked in the project's one
order, pending, answerable by the actor). Part of the write path; `services` re-exports
claim, release and reassign."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils import timezone

from ..arguments import checked_assignees, checked_interrupt_id
from ..audit import actions, trail
from ..engine.errors import (
    AlreadyClaimedError,
    InterruptNotPendingError,
    InterruptSupersededError,
    UnknownInterruptError,
)
from ..engine.status import InterruptStatus
from ..models import Interrupt
from ..policy import reassign_refusal, release_refusal, require_answerer, require_person
from ..transactions import store, write_transaction


def _claimer(interrupt: Interrupt) -> str:
    """The username of whoever holds the claim on `interrupt` (one does)."""
    claimer = interrupt.claimed_by
    assert claimer is not None, f"interrupt {interrupt.pk!r} is not claimed"
    return claimer.get_username()


def locked_interrupt(interrupt_id: str) -> Interrupt:
    """The interrupt, locked in the project's one order (its invocation row first)."""
    checked_interrupt_id(interrupt_id)
    invocation_id = (
        Interrupt.objects.filter(pk=interrupt_id).values_list("invocation_id", flat=True).first()
    )
    if invocation_id is None:
        raise UnknownInterruptError(interrupt_id)
    store().lock_invocation_sync(str(invocation_id))
    return (
        Interrupt.objects.select_for_update(no_key=True, of=("self",))
        .select_related("invocation")
        .get(pk=interrupt_id)
    )


def require_pending(interrupt: Interrupt) -> None:
    if interrupt.status == InterruptStatus.SUPERSEDED:
        raise InterruptSupersededError(interrupt.pk)
    if interrupt.status != InterruptStatus.PENDING:
        raise InterruptNotPendingError(interrupt.pk, interrupt.status)


@write_transaction
def claim(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Mark `actor` as working on a pending interrupt they may answer. Claiming one's own
    claim again changes nothing; someone else's claim raises AlreadyClaimedError (a claim
    never blocks a decision, it only tells colleagues)."""
    require_person(actor)
    interrupt = locked_interrupt(interrupt_id)
    require_answerer(actor, interrupt)
    require_pending(interrupt)
    if interrupt.claimed_by_id not in (None, actor.pk):
        raise AlreadyClaimedError(interrupt.pk, _claimer(interrupt))
    if interrupt.claimed_by_id is None:
        interrupt.claimed_by, interrupt.claimed_at = actor, timezone.now()
        interrupt.save(update_fields=["claimed_by", "claimed_at"])
        trail.record(actions.INTERRUPT_CLAIMED, interrupt=interrupt, actor=actor)
    return interrupt


@write_transaction
def release(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Drop the claim on an interrupt: its claimer may, and so may a supervisor
    (`workflows.reassign_interrupt`). Releasing an unclaimed interrupt changes nothing."""
    require_person(actor)
    interrupt = locked_interrupt(interrupt_id)
    if interrupt.claimed_by_id is None:
        return interrupt
    refused = release_refusal(actor, interrupt)
    if refused:
        raise PermissionDenied(refused)
    claimer = _claimer(interrupt)
    interrupt.claimed_by, interrupt.claimed_at = None, None
    interrupt.save(update_fields=["claimed_by", "claimed_at"])
    trail.record(
        actions.INTERRUPT_RELEASED, interrupt=interrupt, actor=actor, data={"claimed_by": claimer}
    )
    return interrupt


@write_transaction
def reassign(interrupt_id: str, assignees: list[str], *, actor: Any) -> Interrupt:
    """Replace who may answer a pending interrupt (an empty list: anyone with the answer
    permission), and drop its claim. Allowed to supervisors (`workflows.reassign_interrupt`)
    and to those who may answer it now in their own right (not to a delegate:
    `policy.reassign_refusal`). Decisions already recorded stay, and count toward
    the quorum; assignees who cannot reach it are refused (ResponseValidationError)."""
    require_person(actor)
    interrupt = locked_interrupt(interrupt_id)
    refused = reassign_refusal(actor, interrupt)
    if refused:
        raise PermissionDenied(refused)
    require_pending(interrupt)
    handed = hand_over(interrupt, assignees)
    interrupt.save(update_fields=["assignees", "claimed_by", "claimed_at"])
    trail.record(actions.INTERRUPT_REASSIGNED, interrupt=interrupt, actor=actor, data=handed)
    return interrupt


def hand_over(interrupt: Interrupt, assignees: list[str]) -> dict[str, Any]:
    """Hand a locked, pending question over to `assignees` and drop its claim (decisions
    recorded stay and count toward the quorum); what its audit entry says about it. The
    caller saves it. ResponseValidationError, changing nothing, for assignees who do not
    exist or cannot reach the quorum (`checked_assignees`)."""
    previous = interrupt.assignees
    claimer = _claimer(interrupt) if interrupt.claimed_by_id else None
    interrupt.assignees = checked_assignees(interrupt, assignees)
    interrupt.claimed_by, interrupt.claimed_at = None, None
    return {"assignees": interrupt.assignees, "previous": previous, "claimed_by": claimer}
