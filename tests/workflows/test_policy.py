"""Who may answer (DESIGN 4.1): the policy, its queryset counterpart, the backend behind
user.has_perm, the RequestInput checks and the configuration checks."""

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.utils.module_loading import import_string as real_import_string

from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory, StaffFactory, UserFactory
from workflows import checks, conf
from workflows.engine import RequestInput
from workflows.engine.status import NodeStatus
from workflows.models import Interrupt, Invocation
from workflows.policy import AssigneePolicy, answer_policy

pytestmark = pytest.mark.django_db(transaction=True)
PERM = "workflows.answer_interrupt"


def answerable_ids(user) -> set[str]:
    return set(
        answer_policy().answerable(user, Interrupt.objects.all()).values_list("pk", flat=True)
    )


def test_assignee_by_user_and_by_group():
    alice = ApproverFactory(username="alice")
    bob = ApproverFactory(username="bob")
    carol = ApproverFactory(username="carol")
    Group.objects.create(name="finance").user_set.add(bob)
    by_name = ask(assignees=["user:alice"])
    by_group = ask(assignees=["group:finance"])
    anyone = ask()

    assert alice.has_perm(PERM, by_name) and not alice.has_perm(PERM, by_group)
    assert bob.has_perm(PERM, by_group) and not bob.has_perm(PERM, by_name)
    assert not carol.has_perm(PERM, by_name) and not carol.has_perm(PERM, by_group)
    assert all(u.has_perm(PERM, anyone) for u in (alice, bob, carol))
    assert answerable_ids(alice) == {by_name.pk, anyone.pk}
    assert answerable_ids(bob) == {by_group.pk, anyone.pk}
    assert answerable_ids(carol) == {anyone.pk}


def test_staff_without_the_permission_and_inactive_users_may_answer_nothing():
    staff = UserFactory(is_staff=True)
    inactive = ApproverFactory(is_active=False)
    interrupt = ask()
    for user in (staff, inactive):
        assert not user.has_perm(PERM, interrupt)
        assert answerable_ids(user) == set()
    assert "lacks the permission workflows.answer_interrupt" in AssigneePolicy().refusal(
        staff, interrupt
    )


def test_a_username_that_only_prefixes_an_assignee_is_not_it():
    ann = ApproverFactory(username="ann")
    interrupt = ask(assignees=["user:anna"])
    assert not ann.has_perm(PERM, interrupt)
    assert answerable_ids(ann) == set()


def test_four_eyes_bars_the_user_who_started_the_invocation():
    starter = ApproverFactory(username="starter")
    other = ApproverFactory(username="other")
    guarded = ask(user=starter, four_eyes=True)
    open_ = ask(user=starter)
    assert not starter.has_perm(PERM, guarded)
    assert starter.has_perm(PERM, open_)
    assert other.has_perm(PERM, guarded)
    assert answerable_ids(starter) == {open_.pk}
    assert answerable_ids(other) == {guarded.pk, open_.pk}
    assert "four eyes" in AssigneePolicy().refusal(starter, guarded)


def test_superusers_pass_the_model_permission_but_the_policy_still_binds_them():
    root = StaffFactory(username="root")
    assigned = ask(assignees=["user:someone"])
    unassigned = ask()
    # Django says yes to every active superuser before any backend is asked...
    assert root.has_perm(PERM, assigned)
    # ...so the write path and the lists ask the policy itself.
    assert not answer_policy().can_answer(root, assigned)
    assert answer_policy().can_answer(root, unassigned)
    assert answerable_ids(root) == {unassigned.pk}


class NobodyPolicy(AssigneePolicy):
    def refusal(self, user, interrupt):
        return "closed for the holidays"

    def answerable(self, user, queryset):
        return queryset.none()


@override_settings(HITL={"ANSWER_POLICY": "tests.workflows.test_policy.NobodyPolicy"})
def test_answer_policy_setting_replaces_the_rule():
    alice = ApproverFactory()
    interrupt = ask()
    assert not alice.has_perm(PERM, interrupt)
    assert answerable_ids(alice) == set()


def test_the_policy_class_is_imported_once_and_again_when_the_settings_change(monkeypatch):
    imported = []

    def import_string(path):
        imported.append(path)
        return real_import_string(path)

    monkeypatch.setattr(conf, "import_string", import_string)
    with override_settings(HITL={}):
        assert [type(answer_policy()) for _ in range(3)] == [AssigneePolicy] * 3
        with override_settings(HITL={"ANSWER_POLICY": "tests.workflows.test_policy.NobodyPolicy"}):
            assert type(answer_policy()) is NobodyPolicy
            assert type(answer_policy()) is NobodyPolicy
        assert type(answer_policy()) is AssigneePolicy
    assert imported == [
        "workflows.policy.AssigneePolicy",
        "tests.workflows.test_policy.NobodyPolicy",
        "workflows.policy.AssigneePolicy",
    ]


class NoPolicy:
    """Names no can_answer and no answerable."""


@override_settings(HITL={"ANSWER_POLICY": "tests.workflows.test_policy.NoPolicy"})
def test_a_class_that_is_no_policy_fails_the_checks():
    (error,) = checks.check_answer_rule()
    assert error.id == "workflows.E102"
    assert error.msg == (
        'HITL["ANSWER_POLICY"] tests.workflows.test_policy.NoPolicy lacks '
        "['can_answer', 'answerable']"
    )


@pytest.mark.parametrize(
    ("request_kwargs", "message"),
    [
        ({"assignees": "user:alice"}, "assignees must be a list"),
        ({"assignees": ["alice"]}, "'alice' is not \"user:<username>\""),
        ({"assignees": ["role:boss"]}, "'role:boss' is not"),
        ({"assignees": ["user:"]}, "'user:' is not"),
        ({"quorum": 0}, "quorum must be an integer of at least 1"),
        ({"quorum": True}, "quorum must be an integer"),
        ({"four_eyes": "yes"}, "four_eyes must be True or False"),
        ({"quorum": 2, "response_schema": {"type": "object"}}, "boolean 'approved'"),
        (
            {
                "quorum": 2,
                "response_schema": {**APPROVAL, "properties": {"approved": {"type": "boolean"}}},
            },
            "declare a 'decisions' property",
        ),
        (
            {"quorum": 2, "response_schema": {**APPROVAL, "required": ["approved", "decisions"]}},
            "cannot be required",
        ),
        ({"quorum": 3, "assignees": ["user:a", "user:b"]}, "quorum 3 cannot be met by the 2"),
    ],
)
def test_bad_who_answers_values_fail_the_node_with_a_clear_message(request_kwargs, message):
    kwargs = {"response_schema": APPROVAL, **request_kwargs}
    with pytest.raises(ValueError, match=message):
        RequestInput(**kwargs)
    with pytest.raises(Interrupt.DoesNotExist):
        ask(**kwargs)
    invocation = Invocation.objects.get()
    assert invocation.status == NodeStatus.FAILED
    assert message.split("'")[0] in invocation.error
    assert not Interrupt.objects.exists()


def test_who_answers_survives_the_store_round_trip():
    Group.objects.create(name="ops").user_set.add(UserFactory(), UserFactory())
    interrupt = ask(assignees=["group:ops", "user:ada"], quorum=2, four_eyes=True)
    assert (interrupt.assignees, interrupt.quorum, interrupt.four_eyes) == (
        ["group:ops", "user:ada"],
        2,
        True,
    )
    request = RequestInput(
        assignees=["user:x", "group:y"], quorum=2, four_eyes=True, response_schema=APPROVAL
    )
    assert RequestInput.from_dict(request.to_dict()) == request


def test_system_checks_name_a_missing_backend_and_a_broken_policy():
    model_backend_only = ["django.contrib.auth.backends.ModelBackend"]
    with (
        override_settings(AUTHENTICATION_BACKENDS=model_backend_only),
        pytest.raises(SystemCheckError, match=r"workflows\.E101"),
    ):
        call_command("check")
    with (
        override_settings(HITL={"ANSWER_POLICY": "nowhere.Policy"}),
        pytest.raises(SystemCheckError, match=r"workflows\.E102"),
    ):
        call_command("check")
    call_command("check")
