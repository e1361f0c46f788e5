"""Helpers of the delegation tests: people, a delegation in force, and the window times."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import ApproverFactory
from workflows import services


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
