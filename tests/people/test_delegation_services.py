"""services.delegate and end_delegation: who may delegate whom and end what, the clear
errors that store nothing, the audit entries and the signal after commit."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from tests.asking import WORKFLOW
from tests.factories import ApproverFactory, StaffFactory, UserFactory, grant_answer
from tests.people.conftest import away, window
from workflows import services, signals
from workflows.audit import actions, trail
from workflows.audit.verify import verify
from workflows.engine.errors import UnknownDelegationError
from workflows.models import AuditEntry, Delegation

pytestmark = pytest.mark.django_db(transaction=True)


def unchanged(call, error, match: str):
    before = (Delegation.objects.count(), AuditEntry.objects.count())
    with pytest.raises(error, match=match) as raised:
        call()
    assert (Delegation.objects.count(), AuditEntry.objects.count()) == before
    return raised.value


@pytest.fixture
def changes():
    seen = []

    def receiver(sender, **kwargs):
        seen.append((kwargs["delegation_id"], kwargs["action"]))

    signals.delegation_changed.connect(receiver, weak=False, dispatch_uid="test-delegations")
    yield seen
    signals.delegation_changed.disconnect(dispatch_uid="test-delegations")


# --- who may delegate whom --------------------------------------------------------------------


def admin_with(*codenames, staff=True):
    user = UserFactory(is_staff=staff)
    return grant_answer(user, *codenames)


ACTORS = {
    "self": lambda ada: ada,
    "other without the permission": lambda ada: ApproverFactory(username="other"),
    "staff with add_delegation": lambda ada: admin_with("add_delegation"),
    "add_delegation but not staff": lambda ada: admin_with("add_delegation", staff=False),
    "superuser": lambda ada: StaffFactory(),
    "anonymous": lambda ada: AnonymousUser(),
    "inactive self": lambda ada: (
        type(ada).objects.filter(pk=ada.pk).update(is_active=False)
        and type(ada).objects.get(pk=ada.pk)
    ),
}
MAY_DELEGATE = {"self", "staff with add_delegation", "superuser"}


@pytest.mark.parametrize("who", ACTORS)
def test_who_may_delegate_adas_work(ada, bob, who):
    actor = ACTORS[who](ada)
    starts_at, ends_at = window()
    if who in MAY_DELEGATE:
        delegation = services.delegate(ada, bob, starts_at, ends_at, actor=actor)
        assert (delegation.delegator, delegation.delegate, delegation.created_by) == (
            ada,
            bob,
            actor,
        )
        return
    call = lambda: services.delegate(ada, bob, starts_at, ends_at, actor=actor)  # noqa: E731
    match = {
        "anonymous": "anonymous user may change nothing",
        "inactive self": "is inactive",
    }.get(who, "may delegate only their own work")
    unchanged(call, PermissionDenied, match)


def test_the_system_may_delegate_anyones_work(ada, bob):
    assert away(ada, bob, actor=None).created_by is None


ENDERS = {
    "delegator": lambda d: d.delegator,
    "creator": lambda d: d.created_by,
    "delegate": lambda d: d.delegate,
    "other": lambda d: ApproverFactory(username="other"),
    "change_delegation": lambda d: admin_with("change_delegation", staff=False),
    "anonymous": lambda d: AnonymousUser(),
}
MAY_END = {"delegator", "creator", "change_delegation"}


@pytest.mark.parametrize("who", ENDERS)
def test_who_may_end_a_delegation(ada, bob, who):
    delegation = away(ada, bob, actor=admin_with("add_delegation"))
    actor = ENDERS[who](delegation)
    if who in MAY_END:
        ended = services.end_delegation(delegation, actor=actor)
        assert ended.ended_at is not None
        return
    unchanged(
        lambda: services.end_delegation(delegation.pk, actor=actor),
        PermissionDenied,
        "anonymous" if who == "anonymous" else "lacks the permission workflows.change_delegation",
    )
    assert Delegation.objects.get(pk=delegation.pk).ended_at is None


# --- clear errors, nothing stored -------------------------------------------------------------


def inactive_user():
    return ApproverFactory(username="gone", is_active=False)


@pytest.mark.parametrize(
    "change, field, message",
    [
        (lambda a, b, s, e: (a, b, e, s), "ends_at", "ends before it starts"),
        (lambda a, b, s, e: (a, b, s, s), "ends_at", "ends before it starts"),
        (lambda a, b, s, e: (a, a, s, e), "delegate", "cannot stand in for themselves"),
        (lambda a, b, s, e: (a, inactive_user(), s, e), "delegate", "gone is inactive"),
        (lambda a, b, s, e: (a, AnonymousUser(), s, e), "delegate", "not an anonymous one"),
        (
            lambda a, b, s, e: (a, UserFactory(username="plain"), s, e),
            "delegate",
            "plain lacks the permission workflows.answer_interrupt",
        ),
        (
            lambda a, b, s, e: (a, b, s - timedelta(days=9), s - timedelta(days=8)),
            "ends_at",
            "in the past",
        ),
        (
            lambda a, b, s, e: (a, b, s.replace(tzinfo=None), e),
            "starts_at",
            "time zone",
        ),
    ],
    ids=[
        "ends before starts",
        "empty window",
        "self",
        "inactive delegate",
        "anonymous delegate",
        "delegate without the permission",
        "over already",
        "naive",
    ],
)
def test_bad_values_are_refused_naming_the_field(ada, bob, change, field, message):
    delegator, delegate, starts_at, ends_at = change(ada, bob, *window())
    error = unchanged(
        lambda: services.delegate(delegator, delegate, starts_at, ends_at, actor=StaffFactory()),
        ValidationError,
        message,
    )
    assert list(error.message_dict) == [field]


def test_an_inactive_delegator_is_refused(bob):
    gone = inactive_user()
    unchanged(
        lambda: services.delegate(gone, bob, *window(), actor=None), ValidationError, "inactive"
    )


@pytest.mark.parametrize(
    "workflows, message",
    [
        (["no_such_flow"], "no registered workflow named 'no_such_flow'"),
        ("hitl_test_ask", "must be a list"),
        ([3], "names are strings"),
    ],
)
def test_workflows_must_be_registered_names(ada, bob, workflows, message):
    error = unchanged(
        lambda: services.delegate(ada, bob, *window(), workflows=workflows, actor=ada),
        ValidationError,
        message,
    )
    assert list(error.message_dict) == ["workflows"]


def test_workflow_names_are_kept_once_and_empty_means_all(ada, bob):
    named = away(ada, bob, workflows=[WORKFLOW, WORKFLOW])
    assert named.workflows == [WORKFLOW]
    services.end_delegation(named, actor=ada)
    assert away(ada, bob, workflows=[]).workflows == []


@pytest.mark.parametrize(
    "first, second, overlaps",
    [
        ((None, 0, 24), (None, 12, 48), True),
        ((None, 0, 24), (None, 24, 48), False),  # back to back
        (([WORKFLOW], 0, 24), (["test_expense"], 0, 24), False),
        (([WORKFLOW], 0, 24), (None, 0, 24), True),
        (([WORKFLOW], 0, 24), ([WORKFLOW, "test_expense"], 0, 24), True),
    ],
    ids=["windows", "back to back", "other workflows", "all", "shared workflow"],
)
def test_the_same_two_people_may_not_overlap(ada, bob, first, second, overlaps):
    workflows, start, end = first
    away(ada, bob, workflows=workflows, start_hours=start - 1, end_hours=end)
    workflows, start, end = second
    call = lambda: away(ada, bob, workflows=workflows, start_hours=start, end_hours=end)  # noqa: E731
    if overlaps:
        unchanged(call, ValidationError, "bob already stands in for ada")
    else:
        call()


def test_two_delegates_may_cover_the_same_time(ada, bob):
    away(ada, bob)
    away(ada, ApproverFactory(username="cy"))
    assert Delegation.objects.filter(delegator=ada).count() == 2


def test_an_ended_delegation_does_not_block_a_new_one(ada, bob):
    services.end_delegation(away(ada, bob), actor=ada)
    away(ada, bob)


def test_an_unknown_delegation_cannot_be_ended(ada):
    with pytest.raises(UnknownDelegationError):
        services.end_delegation(10**9, actor=ada)


# --- audit and signal -------------------------------------------------------------------------


def test_each_change_is_audited_outside_any_invocation(ada, bob):
    staff = admin_with("add_delegation")
    delegation = away(ada, bob, workflows=[WORKFLOW], actor=staff)
    created = AuditEntry.objects.get(action=actions.DELEGATION_CREATED)
    assert (created.invocation_id, created.interrupt_id, created.actor) == (None, None, staff)
    assert created.data == {
        "delegation": delegation.pk,
        "delegator": "ada",
        "delegate": "bob",
        "starts_at": delegation.starts_at.isoformat(),
        "ends_at": delegation.ends_at.isoformat(),
        "workflows": [WORKFLOW],
    }
    services.end_delegation(delegation, actor=ada)
    ended = AuditEntry.objects.get(action=actions.DELEGATION_ENDED)
    assert (ended.actor, ended.data["delegation"]) == (ada, delegation.pk)
    assert ended.prev_hash == created.entry_hash  # one chain for actions outside invocations
    assert verify().ok


def test_ending_twice_or_after_the_end_changes_nothing(ada, bob, changes):
    delegation = away(ada, bob)
    first = services.end_delegation(delegation, actor=ada)
    again = services.end_delegation(delegation, actor=ada)
    assert again.ended_at == first.ended_at
    assert AuditEntry.objects.filter(action=actions.DELEGATION_ENDED).count() == 1
    assert [action for _, action in changes] == [
        actions.DELEGATION_CREATED,
        actions.DELEGATION_ENDED,
    ]


def test_the_signal_is_sent_after_commit_only(ada, bob, changes):
    with transaction.atomic():
        delegation = away(ada, bob)
        assert changes == []
    assert changes == [(delegation.pk, actions.DELEGATION_CREATED)]
    with pytest.raises(RuntimeError), transaction.atomic():
        services.end_delegation(delegation, actor=ada)
        raise RuntimeError("rolled back")
    assert changes == [(delegation.pk, actions.DELEGATION_CREATED)]
    assert Delegation.objects.get(pk=delegation.pk).ended_at is None


def test_a_delegation_not_yet_started_can_be_ended(ada, bob):
    delegation = away(ada, bob, start_hours=24, end_hours=48)
    assert services.end_delegation(delegation, actor=ada).ended_at <= timezone.now()


class AuditWriteFailed(RuntimeError):
    pass


def test_a_change_whose_audit_entry_fails_is_not_kept(ada, bob, monkeypatch, changes):
    delegation = away(ada, bob)

    def failing(*args, **kwargs):
        raise AuditWriteFailed("the trail is unavailable")

    monkeypatch.setattr(trail, "record", failing)
    with pytest.raises(AuditWriteFailed):
        services.end_delegation(delegation, actor=ada)
    with pytest.raises(AuditWriteFailed):
        away(ada, ApproverFactory(username="cy"))
    assert list(Delegation.objects.values_list("pk", "ended_at")) == [(delegation.pk, None)]
    assert changes == [(delegation.pk, actions.DELEGATION_CREATED)]
