"""A delegation is announced to its delegate when it starts (DESIGN 4.3): at once when it
is active when made, else by the periodic sweep (`services.announce_delegations`, beat
and `hitl_periodic`) once its start has passed, exactly once, never before it starts nor
after it ended. Time passing is a window moved into the past."""

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from tests.asking import ask
from tests.people.conftest import away
from tests.people.test_notifications import RECORDER, calls
from workflows import services, signals
from workflows.models import Delegation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def started() -> Any:
    """The delegations the "delegation.started" signal was sent for, in order."""
    sent: list[Any] = []

    def receiver(sender: Any, delegation_id: Any, action: str, **kwargs: Any) -> None:
        if action == signals.DELEGATION_STARTED:
            sent.append(delegation_id)

    signals.delegation_changed.connect(receiver)
    yield sent
    signals.delegation_changed.disconnect(receiver)


def begins(delegation: Delegation, *, hours_ago: float = 1) -> None:
    """Let time pass until `delegation` has been running for `hours_ago` hours."""
    length = delegation.ends_at - delegation.starts_at
    starts_at = timezone.now() - timedelta(hours=hours_ago)
    Delegation.objects.filter(pk=delegation.pk).update(
        starts_at=starts_at, ends_at=starts_at + length
    )


def delegated() -> list[str]:
    return [pk for event, pk, _ in calls if event == "delegated"]


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_later_delegation_is_announced_once_when_it_starts(ada, bob, started):
    question = ask(assignees=["user:ada"])
    calls.clear()
    delegation = away(ada, bob, start_hours=2, end_hours=48)
    assert delegated() == [], "nothing to hand over before it starts"
    assert services.announce_delegations() == 0, "not before it starts"
    assert (delegated(), started) == ([], [])

    begins(delegation)
    assert services.announce_delegations() == 1
    assert services.announce_delegations() == 0, "a second sweep announces nothing"
    assert delegated() == [question.pk]
    assert started == [delegation.pk]
    assert Delegation.objects.get(pk=delegation.pk).announced_at is not None


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_delegation_active_when_made_is_announced_then_and_never_by_the_sweep(ada, bob, started):
    question = ask(assignees=["user:ada"])
    calls.clear()
    delegation = away(ada, bob)
    assert delegated() == [question.pk]
    assert Delegation.objects.get(pk=delegation.pk).announced_at is not None
    assert services.announce_delegations() == 0
    assert (delegated(), started) == ([question.pk], [])


@override_settings(HITL={"NOTIFIERS": [RECORDER]})
def test_a_delegation_over_before_the_sweep_saw_it_start_is_never_announced(ada, bob, started):
    ask(assignees=["user:ada"])
    ended = away(ada, bob, start_hours=2, end_hours=4)
    services.end_delegation(ended, actor=ada)
    lapsed = away(ada, bob, start_hours=5, end_hours=6)
    calls.clear()
    begins(ended)
    begins(lapsed, hours_ago=2)  # its hour ran out an hour ago
    assert services.announce_delegations() == 0
    assert (delegated(), started) == ([], [])


def test_hitl_periodic_announces_the_delegations_that_started(ada, bob, started):
    delegation = away(ada, bob, start_hours=2)
    begins(delegation)
    out = StringIO()
    call_command("hitl_periodic", "--once", stdout=out)
    assert "announced 1 delegation(s)" in out.getvalue()
    assert started == [delegation.pk]
