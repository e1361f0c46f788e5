"""The one answer check (workflows.services.answer_check): a signed question takes no direct answer
from a person; a delegate answers the delegator's question but does not hand it over (so
the delegator keeps it when the delegation ends); and, for generated assignees,
delegations and four-eyes questions, the check agrees with the queryset half of the rule.
The door-by-rule matrix is tests/workflows/test_door_rule_matrix.py."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from hypothesis import HealthCheck, given, settings

from tests.api import conftest as api_fixtures
from tests.approvals.conftest import decision_url
from tests.asking import ask
from tests.factories import ApproverFactory, grant_answer
from tests.passkeys.conftest import enrol, signature
from tests.people import test_delegation_matrix as generated
from tests.people.conftest import away
from workflows import services
from workflows.engine.status import InterruptStatus
from workflows.models import AuditEntry, Decision, Delegation, Interrupt
from workflows.policy import answer_policy, reassign_refusal
from workflows.services.answer_check import check_answer
from workflows.services.passkeys import SignatureRefused

pytestmark = pytest.mark.django_db(transaction=True)
client_for = api_fixtures.client_for  # token-authenticated API clients
world = generated.world  # people in groups and their questions, rewritten by each example
YES = {"approved": True}


def stored(interrupt) -> tuple:
    row = Interrupt.objects.get(pk=interrupt.pk)
    audit = list(AuditEntry.objects.order_by("pk").values_list("action", flat=True))
    return row.status, row.assignees, row.response, Decision.objects.count(), audit


# --- a signed question takes no direct answer from a person --------------------------------------


def test_a_direct_answer_to_a_signed_question_is_refused_and_stores_nothing():
    ann = ApproverFactory(username="ann")
    enrol(ann)
    question = ask(assignees=["user:ann"], require_signature=True)
    before = stored(question)
    with pytest.raises(SignatureRefused, match="record a decision") as refused:
        services.submit_function_responses([{"id": question.pk, "response": YES}], actor=ann)
    assert refused.value.code == "signature_required"
    assert f"interrupts/{question.pk}/decisions/" in str(refused.value)
    assert stored(question) == before


def test_the_api_refuses_it_with_403_signature_required(client_for):
    ann = ApproverFactory(username="ann")
    question = ask(assignees=["user:ann"], require_signature=True)
    before = stored(question)
    body = {"function_responses": [{"id": question.pk, "response": YES}]}
    refused = client_for(ann).post("/api/function-responses/", body, format="json")
    assert (refused.status_code, refused.json()["error"]) == (403, "signature_required")
    assert stored(question) == before


def test_a_signed_decision_answers_it_and_the_system_still_may():
    ann = ApproverFactory(username="ann")
    _, key = enrol(ann)
    signed = ask(assignees=["user:ann"], require_signature=True)
    assertion = signature(key, signed, YES)
    decision = services.decide(signed.pk, YES, actor=ann, assertion=assertion)
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    by_the_system = ask(require_signature=True)  # a node, a command: not a person
    services.submit_function_responses([{"id": by_the_system.pk, "response": YES}])
    assert Interrupt.objects.get(pk=by_the_system.pk).status == InterruptStatus.RESOLVED


# --- a delegate answers the delegator's question, the delegator keeps it -------------------------


@pytest.fixture
def ada():
    return ApproverFactory(username="ada")


@pytest.fixture
def bob():
    return ApproverFactory(username="bob")


def test_a_delegate_may_not_take_the_delegators_question(ada, bob):
    delegation = away(ada, bob)
    question = ask(assignees=["user:ada"])
    before = stored(question)
    for assignees in (["user:bob"], ["user:ada", "user:bob"], []):
        with pytest.raises(PermissionDenied, match=r"bob stands in for ada .* not hand it over"):
            services.reassign(question.pk, assignees, actor=bob)
    assert stored(question) == before
    # After the delegation the question is still ada's: she answers it (or hands it over).
    services.end_delegation(delegation, actor=ada)
    with pytest.raises(PermissionDenied):
        services.decide(question.pk, YES, actor=bob)
    services.reassign(question.pk, ["user:ada"], actor=ada)
    assert services.decide(question.pk, YES, actor=ada).interrupt.status == "resolved"


def test_while_away_the_delegate_answers_for_the_delegator(ada, bob):
    away(ada, bob)
    question = ask(assignees=["user:ada"])
    decision = services.decide(question.pk, YES, actor=bob)
    assert (decision.actor, decision.on_behalf_of) == (bob, ada)


def test_an_assignee_in_their_own_right_and_a_supervisor_still_reassign(ada, bob):
    away(ada, bob)
    shared = ask(assignees=["user:ada", "user:bob"])
    services.reassign(shared.pk, ["user:bob"], actor=bob)  # bob's own question too
    supervisor = grant_answer(ApproverFactory(username="sue"), "reassign_interrupt")
    adas = ask(assignees=["user:ada"])
    services.reassign(adas.pk, ["user:bob"], actor=supervisor)
    assert Interrupt.objects.get(pk=adas.pk).assignees == ["user:bob"]


def test_the_decision_page_offers_a_delegate_no_reassignment(ada, bob, client):
    away(ada, bob)
    question = ask(assignees=["user:ada"])
    client.force_login(bob)
    page = client.get(decision_url(question))
    assert page.status_code == 200 and page.context["may_reassign"] is False
    before = stored(question)
    tried = client.post(decision_url(question), {"_action": "reassign", "assignees": "user:bob"})
    assert tried.status_code == 302
    assert stored(question) == before


# --- the check and the queryset half agree -------------------------------------------------------


def _admitted(interrupt, user, **path) -> bool:
    try:
        check_answer(interrupt, user, YES, **path)
    except PermissionDenied:
        return False
    return True


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(delegated=generated.delegations, asked=generated.questions)
def test_the_check_and_the_lists_agree(world, delegated, asked):
    """Whom the check admits (by a decision or directly) is whom `answerable` lists; it
    answers for a delegator exactly where `answerable_by_delegation` lists the question;
    and a person who is not a supervisor reassigns exactly what they answer in their own
    right."""
    users, interrupt_ids = world
    Delegation.objects.all().delete()
    now = timezone.now()
    for delegator, delegate, window, workflows in delegated:
        start, end, ended = generated.WINDOWS[window]
        Delegation.objects.create(
            delegator=users[delegator],
            delegate=users[delegate],
            starts_at=now + timedelta(hours=start),
            ends_at=now + timedelta(hours=end),
            ended_at=now if ended else None,
            workflows=workflows,
        )
    for pk, (assignees, four_eyes, workflow) in zip(interrupt_ids, asked, strict=True):
        Interrupt.objects.filter(pk=pk).update(
            assignees=assignees, four_eyes=four_eyes, workflow_name=workflow
        )
    policy = answer_policy()
    everything = Interrupt.objects.filter(pk__in=interrupt_ids)
    for name, user in users.items():
        user = type(user).objects.get(username=name)  # fresh: no cached permissions
        listed = set(policy.answerable(user, everything).values_list("pk", flat=True))
        delegated_only = set(
            policy.answerable_by_delegation(user, everything).values_list("pk", flat=True)
        )
        for interrupt in everything.select_related("invocation"):
            admitted = _admitted(interrupt, user, decisions=[])
            assert admitted == _admitted(interrupt, user) == (interrupt.pk in listed), name
            if admitted:
                stand_in = check_answer(interrupt, user, YES).on_behalf_of
                assert (stand_in is not None) == (interrupt.pk in delegated_only), name
            may_reassign = not reassign_refusal(user, interrupt)
            assert may_reassign == (interrupt.pk in listed - delegated_only), name
