"""Helpers of the people-layer tests: people in groups, a delegation in force and its
window times, questions with a ladder, and the inbox views' scene (one question in each
view for alice, and some she never sees)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from tests.asking import ask
from tests.factories import ApproverFactory
from workflows import services
from workflows.engine import Escalation
from workflows.models import Delegation, Interrupt


def window(start_hours: float = -1, end_hours: float = 24):
    """(starts_at, ends_at) relative to now, in hours."""
    now = timezone.now()
    return now + timedelta(hours=start_hours), now + timedelta(hours=end_hours)


SELF = object()


def away(delegator, delegate, *, workflows=None, start_hours=-1, end_hours=24, actor=SELF):
    """`delegator` away, `delegate` standing in (made by the delegator unless `actor`)."""
    starts_at, ends_at = window(start_hours, end_hours)
    return services.delegate(
        delegator,
        delegate,
        starts_at,
        ends_at,
        workflows=workflows,
        actor=delegator if actor is SELF else actor,
    )


@pytest.fixture
def ada(db):
    return ApproverFactory(username="ada", first_name="Ada")


@pytest.fixture
def bob(db):
    return ApproverFactory(username="bob", first_name="Bob")


@dataclass
class Scene:
    alice: object
    mine: Interrupt
    groups: Interrupt
    claimed: Interrupt
    delegated: Interrupt
    overdue: Interrupt
    due_soon: Interrupt
    later: Interrupt  # due in two days: in no view but the whole inbox
    unseen: Interrupt  # assigned to bob alone

    def ids(self, *names: str) -> list[str]:
        return [getattr(self, name).pk for name in names]


def set_due(interrupt: Interrupt, delta: timedelta) -> None:
    Interrupt.objects.filter(pk=interrupt.pk).update(due_at=timezone.now() + delta)


@pytest.fixture
def scene(db) -> Scene:
    alice = ApproverFactory(username="alice")
    dora = ApproverFactory(username="dora")
    ApproverFactory(username="bob")
    Group.objects.create(name="finance").user_set.add(alice)
    now = timezone.now()
    Delegation.objects.create(
        delegator=dora,
        delegate=alice,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
    )
    built = Scene(
        alice=alice,
        mine=ask(message="For alice", assignees=["user:alice"]),
        groups=ask(message="For finance", assignees=["group:finance"]),
        claimed=ask(message="Claimed by alice"),
        delegated=ask(message="For dora, away", assignees=["user:dora"]),
        overdue=ask(message="Overdue one"),
        due_soon=ask(message="Due within the hour"),
        later=ask(message="Due in two days"),
        unseen=ask(message="For bob", assignees=["user:bob"]),
    )
    services.claim(built.claimed.pk, actor=alice)
    set_due(built.overdue, -timedelta(minutes=5))
    set_due(built.due_soon, timedelta(minutes=50))
    set_due(built.later, timedelta(days=2))
    return built


MANAGERS, DIRECTORS = "group:managers", "group:directors"
REMIND_AFTER, HAND_OVER_AFTER = timedelta(hours=4), timedelta(hours=24)
# The ladder of DESIGN 4.3: remind the managers, then hand the question to the directors.
LADDER = [
    Escalation(after=REMIND_AFTER, remind=True),
    Escalation(after=HAND_OVER_AFTER, assignees=[DIRECTORS]),
]


def member(username: str, *groups: str) -> Any:
    """A staff user who may answer interrupts, in the groups named."""
    user = ApproverFactory(username=username)
    names = [group.removeprefix("group:") for group in groups]
    user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in names))
    return type(user).objects.get(pk=user.pk)


@pytest.fixture
def manager() -> Any:
    return member("mia", MANAGERS)


@pytest.fixture
def director() -> Any:
    return member("dora", DIRECTORS)


@pytest.fixture
def laddered(manager: Any, director: Any) -> Callable[..., Interrupt]:
    """Ask a question of the managers with LADDER (or the `escalation` given)."""

    def asking(**request: Any) -> Interrupt:
        request.setdefault("assignees", [MANAGERS])
        request.setdefault("escalation", LADDER)
        return ask(**request)

    return asking
