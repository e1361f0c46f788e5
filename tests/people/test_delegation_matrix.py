"""The answer rule's two halves agree with delegations in play: for generated delegations
(in, before and after their window, ended, for some workflows or all) and generated
questions (assignees, four-eyes, who started them, which workflow), `can_answer(user, i)`
holds exactly for the interrupts `answerable(user, ...)` lists, and
`answerable_by_delegation` lists exactly those answerable through a delegation alone."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory, UserFactory
from workflows.models import Delegation, Interrupt
from workflows.policy import answer_policy

pytestmark = pytest.mark.django_db(transaction=True)

PEOPLE = ["ada", "bob", "cy", "dee", "eve"]  # dee lacks the permission, eve is inactive
ASSIGNEES = ["user:ada", "user:bob", "user:cy", "user:dee", "user:eve", "group:g1", "group:g2"]
WORKFLOWS = [WORKFLOW, "test_expense"]
STARTERS = [None, "ada", "bob", "cy"]
# hours relative to now, and whether ended: in force, not yet, over, ended early
WINDOWS = {"active": (-1, 24, False), "future": (2, 24, False), "past": (-48, -2, False)}
WINDOWS["ended"] = (-1, 24, True)

delegations = st.lists(
    st.tuples(
        st.sampled_from(PEOPLE),
        st.sampled_from(PEOPLE),
        st.sampled_from(list(WINDOWS)),
        st.sampled_from([[], [WORKFLOW], ["test_expense"], WORKFLOWS]),
    ).filter(lambda d: d[0] != d[1]),
    max_size=5,
)
questions = st.lists(
    st.tuples(
        st.lists(st.sampled_from(ASSIGNEES), max_size=3, unique=True),
        st.booleans(),
        st.sampled_from(WORKFLOWS),
    ),
    min_size=len(STARTERS),
    max_size=len(STARTERS),
)


@pytest.fixture
def world(db):
    users = {name: ApproverFactory(username=name) for name in ("ada", "bob", "cy", "eve")}
    users["dee"] = UserFactory(username="dee", is_staff=True)
    type(users["eve"]).objects.filter(username="eve").update(is_active=False)
    Group.objects.create(name="g1").user_set.add(users["ada"], users["cy"])
    Group.objects.create(name="g2").user_set.add(users["bob"], users["dee"])
    interrupts = [ask(user=users.get(starter or "")) for starter in STARTERS]
    return users, [i.pk for i in interrupts]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(delegated=delegations, asked=questions)
@example(  # bob stands in for ada, who started a four-eyes question; cy for bob, in one flow
    delegated=[("ada", "bob", "active", []), ("bob", "cy", "active", ["test_expense"])],
    asked=[
        (["user:ada"], False, WORKFLOW),
        ([], True, WORKFLOW),
        (["group:g2"], True, "test_expense"),
        (["user:bob", "user:ada"], True, WORKFLOW),
    ],
)
def test_the_object_rule_and_the_queryset_agree(world, delegated, asked):
    users, interrupt_ids = world
    Delegation.objects.all().delete()
    now = timezone.now()
    for delegator, delegate, window, workflows in delegated:
        start, end, ended = WINDOWS[window]
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
    for name in PEOPLE:
        user = type(users[name]).objects.get(username=name)  # fresh: no cached permissions
        objects = {
            i.pk for i in everything.select_related("invocation") if policy.can_answer(user, i)
        }
        listed = set(policy.answerable(user, everything).values_list("pk", flat=True))
        assert objects == listed, (name, delegated, asked)
        own = {
            i.pk
            for i in everything.select_related("invocation")
            if i.pk in objects and policy.in_own_right(user, i)
        }
        by_delegation = policy.answerable_by_delegation(user, everything)
        assert set(by_delegation.values_list("pk", flat=True)) == objects - own, name
