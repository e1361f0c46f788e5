"""Delegation (DESIGN 4.3) through the services: a delegate answers for the delegator
inside the window and the workflows only, four-eyes excludes the starter's delegates, one
vote per person whichever hat, on_behalf_of on the decision and its audit entries."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory
from tests.people.conftest import away, window
from tests.workflows.test_decisions import refused
from workflows import services
from workflows.audit import actions
from workflows.engine import FunctionResponse
from workflows.engine.errors import AlreadyDecidedError, ResponseValidationError
from workflows.engine.status import InterruptStatus
from workflows.models import AuditEntry, Delegation, Interrupt
from workflows.policy import answer_policy

pytestmark = pytest.mark.django_db(transaction=True)
PERM = "workflows.answer_interrupt"


def approve(interrupt, actor, approved=True):
    return services.decide(interrupt.pk, {"approved": approved}, actor=actor)


def entry(action: str, interrupt) -> AuditEntry:
    return AuditEntry.objects.get(action=action, interrupt_id=interrupt.pk)


# --- inside and outside the window and the workflows -----------------------------------------


def test_the_delegate_answers_for_the_delegator_and_both_are_recorded(ada, bob):
    away(ada, bob)
    interrupt = ask(assignees=["user:ada"])
    assert bob.has_perm(PERM, interrupt)
    decision = approve(interrupt, bob)
    assert (decision.actor, decision.on_behalf_of) == (bob, ada)
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    for action in (actions.DECISION_RECORDED, actions.ANSWER_ACCEPTED):
        recorded = entry(action, interrupt)
        assert (recorded.actor, recorded.on_behalf_of) == (bob, ada), action


def test_a_question_assigned_to_the_delegators_group_is_covered(ada, bob):
    Group.objects.create(name="finance").user_set.add(ada)
    away(ada, bob)
    decision = approve(ask(assignees=["group:finance"]), bob)
    assert decision.on_behalf_of == ada


@pytest.mark.parametrize(
    "start_hours, end_hours", [(2, 24), (-48, -24)], ids=["not started", "over"]
)
def test_outside_its_window_a_delegation_gives_nothing(ada, bob, start_hours, end_hours):
    starts_at, ends_at = window(start_hours, end_hours)
    if end_hours < 0:  # the service refuses a window in the past: it was made earlier
        delegation = away(ada, bob)
        type(delegation).objects.filter(pk=delegation.pk).update(
            starts_at=starts_at, ends_at=ends_at
        )
    else:
        services.delegate(ada, bob, starts_at, ends_at, actor=ada)
    interrupt = ask(assignees=["user:ada"])
    assert not bob.has_perm(PERM, interrupt)
    refused(lambda: approve(interrupt, bob), PermissionDenied, "stands in for none of them")


def test_an_ended_delegation_gives_nothing(ada, bob):
    delegation = away(ada, bob)
    interrupt = ask(assignees=["user:ada"])
    assert bob.has_perm(PERM, interrupt)
    services.end_delegation(delegation, actor=ada)
    assert not bob.has_perm(PERM, interrupt)


def test_a_delegation_covers_only_its_workflows(ada, bob):
    cy = ApproverFactory(username="cy")
    away(ada, bob, workflows=["test_expense"])
    away(ada, cy, workflows=["test_expense", WORKFLOW])
    interrupt = ask(assignees=["user:ada"])
    assert not bob.has_perm(PERM, interrupt)
    assert cy.has_perm(PERM, interrupt)


def test_no_assignees_needs_no_delegation(ada, bob):
    away(ada, bob)
    decision = approve(ask(), bob)
    assert decision.on_behalf_of is None


def test_a_delegate_who_may_answer_in_their_own_right_votes_as_themselves(ada, bob):
    away(ada, bob)
    decision = approve(ask(assignees=["user:ada", "user:bob"]), bob)
    assert decision.on_behalf_of is None


def test_the_delegate_needs_the_answer_permission_and_the_delegator_too(ada, bob):
    away(ada, bob)
    interrupt = ask(assignees=["user:ada"])
    ada.user_permissions.clear()
    bob = type(bob).objects.get(pk=bob.pk)
    assert not bob.has_perm(PERM, interrupt), "ada may answer nothing now, so neither may bob"


def test_delegations_do_not_chain(ada, bob):
    cy = ApproverFactory(username="cy")
    away(ada, bob)
    away(bob, cy)
    interrupt = ask(assignees=["user:ada"])
    assert bob.has_perm(PERM, interrupt) and not cy.has_perm(PERM, interrupt)


# --- four eyes --------------------------------------------------------------------------------


@pytest.mark.parametrize("assignees", [[], ["user:ada", "user:bob"]], ids=["anyone", "named"])
def test_four_eyes_excludes_the_starters_delegates(ada, bob, assignees):
    away(ada, bob)
    interrupt = ask(user=ada, assignees=assignees, four_eyes=True)
    assert not ada.has_perm(PERM, interrupt)
    assert not bob.has_perm(PERM, interrupt)
    refused(lambda: approve(interrupt, bob), PermissionDenied, "stands in for ada, who started")


def test_four_eyes_excludes_the_starter_even_as_a_delegate(ada, bob):
    away(ada, bob)
    interrupt = ask(user=bob, assignees=["user:ada"], four_eyes=True)
    refused(lambda: approve(interrupt, bob), PermissionDenied, "bob started the invocation")


def test_four_eyes_lets_a_delegate_answer_someone_elses_request(ada, bob):
    carol = ApproverFactory(username="carol")
    away(ada, bob)
    interrupt = ask(user=carol, assignees=["user:ada"], four_eyes=True)
    assert approve(interrupt, bob).on_behalf_of == ada


def test_four_eyes_exclusion_follows_the_delegations_workflows(ada, bob):
    away(ada, bob, workflows=["test_expense"])
    interrupt = ask(user=ada, four_eyes=True)  # not a workflow bob stands in for
    assert bob.has_perm(PERM, interrupt)


# --- one vote per person ----------------------------------------------------------------------


def test_a_person_votes_once_whichever_hat(ada, bob):
    away(ada, bob)
    interrupt = ask(quorum=2, assignees=["user:ada", "user:bob"])
    assert approve(interrupt, bob).on_behalf_of is None
    refused(lambda: approve(interrupt, bob), AlreadyDecidedError, "bob already decided")


def test_the_delegators_vote_cast_by_a_delegate_is_cast(ada, bob):
    dan = ApproverFactory(username="dan")
    away(ada, bob)
    away(ada, dan)
    interrupt = ask(quorum=2, assignees=["user:ada", "user:carol"])
    assert approve(interrupt, bob).on_behalf_of == ada
    refused(lambda: approve(interrupt, dan), AlreadyDecidedError, "ada already decided")
    refused(lambda: approve(interrupt, ada), AlreadyDecidedError, "ada already decided")


def test_a_delegate_for_two_people_still_votes_once(ada, bob):
    eve = ApproverFactory(username="eve")
    away(ada, bob)
    away(eve, bob)
    interrupt = ask(quorum=2, assignees=["user:ada", "user:eve"])
    first = approve(interrupt, bob)
    assert first.on_behalf_of == ada  # the delegation that began first
    refused(lambda: approve(interrupt, bob), AlreadyDecidedError, "bob already decided")
    assert approve(interrupt, eve).interrupt.status == InterruptStatus.RESOLVED


def test_a_delegate_votes_for_the_delegator_whose_vote_is_open(ada, bob):
    eve = ApproverFactory(username="eve")
    away(ada, bob)
    away(eve, bob, start_hours=-0.5)
    interrupt = ask(quorum=3, assignees=["user:ada", "user:eve", "user:fay"])
    approve(interrupt, ada)  # back early, votes herself
    assert approve(interrupt, bob).on_behalf_of == eve


def test_reachability_counts_a_vote_cast_by_a_delegate(ada, bob):
    carol = ApproverFactory(username="carol")
    away(ada, bob)
    interrupt = ask(quorum=2, assignees=["user:ada", "user:carol"])
    approve(interrupt, bob)  # ada's vote
    refused(
        lambda: services.reassign(interrupt.pk, ["user:ada"], actor=carol),
        ResponseValidationError,
        "quorum 2 cannot be met",
    )
    services.reassign(interrupt.pk, ["user:ada", "user:carol"], actor=carol)


# --- the queryset half and the direct path ------------------------------------------------------


def test_answerable_by_delegation_lists_only_what_needs_the_delegation(ada, bob):
    away(ada, bob)
    for_ada = ask(assignees=["user:ada"])
    ask(assignees=["user:bob"])
    ask()
    pending = Interrupt.objects.all()
    policy = answer_policy()
    assert list(policy.answerable_by_delegation(bob, pending)) == [for_ada]
    assert for_ada in policy.answerable(bob, pending)
    assert not policy.answerable_by_delegation(ada, pending).exists()


def test_a_direct_answer_by_a_delegate_names_whom_it_is_for(ada, bob):
    away(ada, bob)
    interrupt = ask(assignees=["user:ada"])
    answer = FunctionResponse(interrupt.pk, "question", {"approved": True})
    services.submit_function_responses([answer], actor=bob)
    recorded = entry(actions.ANSWER_ACCEPTED, interrupt)
    assert (recorded.actor, recorded.on_behalf_of) == (bob, ada)


def test_the_answer_rule_reads_delegations_when_asked_not_when_cached(ada, bob):
    interrupt = ask(assignees=["user:ada"])
    assert not bob.has_perm(PERM, interrupt)
    with transaction.atomic():
        away(ada, bob)
        assert bob.has_perm(PERM, interrupt)


def test_the_rule_reads_a_users_delegations_once_per_object_until_one_changes(ada, bob):
    away(ada, bob)
    questions = [ask(assignees=["user:ada"]) for _ in range(5)]
    questions = list(
        Interrupt.objects.filter(pk__in=[q.pk for q in questions]).select_related("invocation")
    )
    policy = answer_policy()

    def queries_for(count: int) -> int:
        fresh = type(bob).objects.get(pk=bob.pk)
        with CaptureQueriesContext(connection) as queries:
            assert all(policy.can_answer(fresh, q) for q in questions[:count])
        return len(queries)

    assert queries_for(5) == queries_for(1)
    cy = ApproverFactory(username="cy")
    for_cy = ask(assignees=["user:cy"])
    assert not bob.has_perm(PERM, for_cy)
    starts_at, ends_at = window()
    Delegation.objects.create(delegator=cy, delegate=bob, starts_at=starts_at, ends_at=ends_at)
    assert bob.has_perm(PERM, for_cy), "the same user object sees the new delegation"


def test_a_cached_delegation_comes_into_force_when_its_window_opens(ada, bob, monkeypatch):
    delegation = away(ada, bob, start_hours=2, end_hours=24)
    interrupt = ask(assignees=["user:ada"])
    assert not bob.has_perm(PERM, interrupt)
    later = delegation.starts_at + timedelta(minutes=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert bob.has_perm(PERM, interrupt)
