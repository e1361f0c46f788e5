"""Who a user is in the questions' terms: the assignee strings that name them
("user:<username>", "group:<name>"), the active users a list of them names, and whom they
stand in for (the delegations to them in force). Facts, not rules: `policy` decides with
them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from .engine.principals import parse_assignee
from .models import Delegation


def assignee_names(user: Any) -> list[str]:
    """The assignee strings that name `user`: "user:<username>" and one per group.
    Cached on the user object for its lifetime (a request), like Django's permissions."""
    if not hasattr(user, "_hitl_assignee_names"):
        groups = user.groups.values_list("name", flat=True)
        user._hitl_assignee_names = [
            f"user:{user.get_username()}",
            *(f"group:{name}" for name in groups),
        ]
    return user._hitl_assignee_names


def active_delegations(now: Any = None) -> Q:
    """The delegations in force at `now` (default: now): started, not over, not ended."""
    now = timezone.now() if now is None else now
    return Q(starts_at__lte=now, ends_at__gt=now, ended_at__isnull=True)


# Moves on whenever a delegation is saved or deleted (and again when that commits), so a
# user object's cached delegations are read again.
_delegation_changes = itertools.count(1)
_delegation_generation = [0]


@receiver(
    [post_save, post_delete], sender=Delegation, dispatch_uid="workflows.principals.delegations"
)
def _delegations_changed(sender: Any, **kwargs: Any) -> None:
    def bump() -> None:
        _delegation_generation[0] = next(_delegation_changes)

    bump()
    transaction.on_commit(bump, using=kwargs.get("using"))


def active_users_named(assignees: Iterable[str], *, excluded: Iterable[Any] = ()) -> int:
    """How many distinct active users `assignees` name, directly or through a group,
    leaving out the `excluded` user ids."""
    named: dict[str, list[str]] = {"user": [], "group": []}
    for kind, name in map(parse_assignee, assignees):
        named[kind].append(name)
    users = get_user_model()
    return (
        users.objects.filter(is_active=True)
        .filter(
            Q(**{f"{users.USERNAME_FIELD}__in": named["user"]}) | Q(groups__name__in=named["group"])
        )
        .exclude(pk__in=[pk for pk in excluded if pk is not None])
        .distinct()
        .count()
    )


def delegations_to(user: Any) -> list[Delegation]:
    """The delegations to `user` in force now (their delegators loaded), in the order
    they began. Read once per user object while no delegation changes (like
    `assignee_names`, for the lists that ask the rule of every row); which of them are
    in force is decided at each call, so time passing is seen."""
    cached = getattr(user, "_hitl_delegations", None)
    generation = _delegation_generation[0]
    if cached is None or cached[0] != generation:
        unfinished = Delegation.objects.filter(
            delegate=user.pk, ended_at__isnull=True, ends_at__gt=timezone.now()
        )
        rows = list(unfinished.select_related("delegator").order_by("starts_at", "pk"))
        user._hitl_delegations = cached = (generation, rows)
    now = timezone.now()
    return [d for d in cached[1] if d.starts_at <= now < d.ends_at and d.ended_at is None]


def unreachable_quorum(
    assignees: list[str], quorum: int, *, approvals: int = 0, excluded: Iterable[Any] = ()
) -> str:
    """Why `quorum` approvals cannot be reached ("" when they can): the `approvals` given
    so far plus one per distinct active user the assignees name, directly or through a
    group, leaving out `excluded` user ids (who may not vote: the starter of a four-eyes
    question, those who decided already)."""
    if quorum <= 1 or not assignees:
        return ""
    voters = active_users_named(assignees, excluded=excluded)
    if approvals + voters >= quorum:
        return ""
    so_far = f"{approvals} approval(s) so far and " if approvals else ""
    return (
        f"quorum {quorum} cannot be met: {so_far}{voters} active user(s) among "
        f"{', '.join(assignees)} who may still approve"
    )
