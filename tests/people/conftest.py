"""Fixtures of the people-layer tests: people in groups, and questions with a ladder."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group

from tests.asking import ask
from tests.factories import ApproverFactory
from workflows.engine import Escalation
from workflows.models import Interrupt

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
