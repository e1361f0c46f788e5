"""Out of office (DESIGN 4.3): a person's delegation of their questions to someone else
for a while, and its end. The services re-export `delegate` and `end_delegation`; who may
is `policy.DelegationPolicy`, and what an active delegation lets its delegate answer is the
answer policy's (`policy.AssigneePolicy`).

Overlaps: a person may be covered by several delegates at once (one per workflow, or two
for the same work), but the same delegator and delegate may not have two delegations whose
windows and workflows overlap; the second is refused, naming the first (end it, or choose
another window). Creations for one delegator are serialised on the delegator's user row, so
two racing requests cannot both pass that check.

Announcing: the delegate is told (signal `delegation_changed`, then the "delegated"
notification of the delegator's questions) when the delegation starts: at once for one
that is active when made, else by the periodic `announce_delegations` once `starts_at` has
passed, exactly once (`Delegation.announced_at`, set by a conditional UPDATE).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.utils import timezone

from ..audit import actions, trail
from ..engine.errors import UnknownDelegationError
from ..models import Delegation
from ..policy import ANSWER_PERMISSION, answer_policy, delegation_policy
from ..registry import registry
from ..signals import DELEGATION_STARTED, delegation_changed, send_on_commit
from ..transactions import write_transaction

__all__ = [
    "announce_delegations",
    "checked_delegation",
    "delegate",
    "delegation_key",
    "end_delegation",
]

LARGEST_ID = 2**63 - 1  # of a 64-bit id column

# Delegations announced per sweep (the earliest started first); the rest wait for the next.
ANNOUNCE_BATCH = 500


def _refuse(field: str, message: str) -> ValidationError:
    return ValidationError({field: [ValidationError(message, code="invalid_delegation")]})


def _checked_person(user: Any, field: str) -> None:
    if not getattr(user, "is_authenticated", False):
        raise _refuse(field, "must be a signed-in user, not an anonymous one")
    if not user.is_active:
        raise _refuse(field, f"{user.get_username()} is inactive")


def _checked_workflows(workflows: Iterable[str] | None) -> list[str]:
    if workflows is None:
        return []
    if isinstance(workflows, str) or not isinstance(workflows, Iterable):
        raise _refuse("workflows", "must be a list of workflow names (empty: every workflow)")
    names = list(dict.fromkeys(workflows))
    known = {definition.name for definition in registry.definitions()}
    for name in names:
        if not isinstance(name, str):
            raise _refuse("workflows", f"names are strings; got {type(name).__name__}")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise _refuse(
            "workflows",
            f"no registered workflow named {', '.join(map(repr, unknown))} "
            f"(registered: {', '.join(sorted(known)) or 'none'})",
        )
    return names


def checked_delegation(
    delegator: Any,
    delegate: Any,
    starts_at: datetime,
    ends_at: datetime,
    workflows: Iterable[str] | None = None,
) -> list[str]:
    """The workflow names (deduplicated; [] for all) if a delegation with these values may
    exist, else ValidationError naming the field: both people active users, not the same
    one, the delegate able to answer questions at all, a window that ends after it starts
    and after now, workflows that are registered. Overlaps are `delegate`'s to check."""
    _checked_person(delegator, "delegator")
    _checked_person(delegate, "delegate")
    if delegate.pk == delegator.pk:
        raise _refuse("delegate", f"{delegator.get_username()} cannot stand in for themselves")
    if not answer_policy().may_answer_any(delegate):
        raise _refuse(
            "delegate",
            f"{delegate.get_username()} lacks the permission {ANSWER_PERMISSION}: a "
            "delegate answers with their own permission and could answer nothing",
        )
    for field, value in (("starts_at", starts_at), ("ends_at", ends_at)):
        if not isinstance(value, datetime):
            raise _refuse(field, f"must be a date and time; got {type(value).__name__}")
        if timezone.is_naive(value):
            raise _refuse(field, "must carry its time zone")
    if ends_at <= starts_at:
        raise _refuse("ends_at", "must be after starts_at: the delegation ends before it starts")
    if ends_at <= timezone.now():
        raise _refuse("ends_at", "is in the past: the delegation would never be active")
    return _checked_workflows(workflows)


def _overlapping(
    delegator: Any, delegate: Any, starts_at: datetime, ends_at: datetime, workflows: list[str]
) -> Delegation | None:
    candidates = Delegation.objects.filter(
        delegator=delegator.pk,
        delegate=delegate.pk,
        ended_at__isnull=True,
        starts_at__lt=ends_at,
        ends_at__gt=starts_at,
    ).order_by("starts_at")
    for existing in candidates:
        shared = not existing.workflows or not workflows
        if shared or set(existing.workflows) & set(workflows):
            return existing
    return None


def _summary(delegation: Delegation) -> dict[str, Any]:
    return {
        "delegation": delegation.pk,
        "delegator": delegation.delegator.get_username(),
        "delegate": delegation.delegate.get_username(),
        "starts_at": delegation.starts_at.isoformat(),
        "ends_at": delegation.ends_at.isoformat(),
        "workflows": delegation.workflows,
    }


def _announce(delegation_id: Any, action: str) -> None:
    send_on_commit(
        delegation_changed, sender=Delegation, delegation_id=delegation_id, action=action
    )


@write_transaction
def delegate(
    delegator: Any,
    delegate: Any,
    starts_at: datetime,
    ends_at: datetime,
    *,
    workflows: Iterable[str] | None = None,
    actor: Any,
) -> Delegation:
    """While it is active (from `starts_at` until `ends_at`), `delegate` may answer what
    `delegator` may for the questions assigned to the delegator, in `workflows` (None or
    empty: all). PermissionDenied unless `actor` may delegate the delegator's work
    (`policy.DelegationPolicy`; None, the system, may); ValidationError, naming the field,
    for values `checked_delegation` refuses or an overlap with a delegation between the
    same two people. Audited (`delegation.created`) in the same transaction; signal
    `delegation_changed` after commit."""
    refused = delegation_policy().refusal_to_delegate(actor, delegator)
    if refused:
        raise PermissionDenied(refused)
    names = checked_delegation(delegator, delegate, starts_at, ends_at, workflows)
    # Serialises the creations for one delegator, so the overlap check holds.
    get_user_model().objects.select_for_update().filter(pk=delegator.pk).exists()
    existing = _overlapping(delegator, delegate, starts_at, ends_at, names)
    if existing is not None:
        raise _refuse(
            NON_FIELD_ERRORS,
            f"{delegate.get_username()} already stands in for {delegator.get_username()} "
            f"from {existing.starts_at:%Y-%m-%d %H:%M} until {existing.ends_at:%Y-%m-%d %H:%M}"
            f" (delegation {existing.pk}) in workflows that overlap; end it or choose "
            "another window",
        )
    now = timezone.now()
    delegation = Delegation.objects.create(
        delegator=delegator,
        delegate=delegate,
        starts_at=starts_at,
        ends_at=ends_at,
        workflows=names,
        created_by=actor,
        # Active already: announced by this transaction's signal, never by the sweep.
        announced_at=now if starts_at <= now else None,
    )
    trail.record(actions.DELEGATION_CREATED, actor=actor, data=_summary(delegation))
    _announce(delegation.pk, actions.DELEGATION_CREATED)
    return delegation


def delegation_key(value: Any) -> int:
    """`value` (an int, or its text from a URL or a form) as a delegation's id;
    UnknownDelegationError for what no row can have: not a decimal number, or past 64 bits
    (which the database would refuse with an error rather than find nothing)."""
    text = str(value)
    if not (text.isascii() and text.isdigit() and int(text) <= LARGEST_ID):
        raise UnknownDelegationError(value)
    return int(text)


@write_transaction
def end_delegation(delegation: Delegation | Any, *, actor: Any) -> Delegation:
    """End `delegation` (a Delegation or its id) now: its delegate stops standing in.
    Allowed to its delegator, to whoever made it and to holders of
    `workflows.change_delegation` (PermissionDenied otherwise); UnknownDelegationError
    for an unknown id. Ending one that is over already changes nothing; otherwise audited
    (`delegation.ended`) in the same transaction, signal `delegation_changed` after
    commit."""
    delegation_id = delegation_key(getattr(delegation, "pk", delegation))
    locked = (
        Delegation.objects.select_for_update(of=("self",))
        .select_related("delegator", "delegate")
        .filter(pk=delegation_id)
        .first()
    )
    if locked is None:
        raise UnknownDelegationError(delegation_id)
    refused = delegation_policy().refusal_to_end(actor, locked)
    if refused:
        raise PermissionDenied(refused)
    now = timezone.now()
    if locked.ended_at is not None or locked.ends_at <= now:
        return locked
    locked.ended_at = now
    locked.save(update_fields=["ended_at"])
    trail.record(
        actions.DELEGATION_ENDED,
        actor=actor,
        data={**_summary(locked), "ended_at": now.isoformat()},
    )
    _announce(locked.pk, actions.DELEGATION_ENDED)
    return locked


def announce_delegations(now: datetime | None = None) -> int:
    """Announce each delegation that has started by `now` (default: now), is still
    running and was not announced yet: signal `delegation_changed` with action
    "delegation.started" after commit, once per delegation however many sweeps run at
    once. The number announced."""
    now = now or timezone.now()
    started = Delegation.objects.filter(
        announced_at__isnull=True, ended_at__isnull=True, starts_at__lte=now, ends_at__gt=now
    ).order_by("starts_at")
    announced = 0
    for delegation_id in started.values_list("pk", flat=True)[:ANNOUNCE_BATCH]:
        announced += _announce_started(delegation_id, now)
    return announced


@write_transaction
def _announce_started(delegation_id: Any, now: datetime) -> int:
    # Conditional on still being unannounced and running: a racing sweep waits on the
    # row's lock and then matches nothing; an end_delegation committed first wins too.
    marked = Delegation.objects.filter(
        pk=delegation_id, announced_at__isnull=True, ended_at__isnull=True, ends_at__gt=now
    ).update(announced_at=now)
    if marked:
        _announce(delegation_id, DELEGATION_STARTED)
    return marked
