"""The question envelope (DESIGN 4.5): one rendering of a question per user, which every
protocol adapter shows; what it says about who may answer follows the answer rule."""

import hashlib
import json

import pytest
from django.contrib.auth.models import Group

from tests.asking import ask
from tests.factories import ApproverFactory, UserFactory, grant_answer
from tests.gates.gated import DELETE, REFUND, pending
from workflows import services
from workflows.engine.questions import effect_question_id, gate_question_id
from workflows.models import Interrupt
from workflows.protocols import envelope
from workflows.protocols.envelope import question_kind

pytestmark = pytest.mark.django_db(transaction=True)


def member(username: str, group: str):
    user = ApproverFactory(username=username)
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return grant_answer(user, "answer_interrupt")


def test_an_input_question_for_its_assignee():
    approver = ApproverFactory(username="amy")
    interrupt = ask(assignees=["user:amy"], priority="high")

    shown = envelope(interrupt, approver)

    assert shown["id"] == interrupt.pk
    assert shown["kind"] == "input"
    assert shown["message"] == "Approve?"
    assert shown["response_schema"] == interrupt.response_schema
    assert shown["priority"] == "high"
    assert shown["answerable"] is True
    assert shown["needs"] == []
    assert shown["tool_call_id"] is None
    assert shown["action_fingerprint"] is None
    assert shown["links"]["page"].endswith(f"/{interrupt.pk}/change/")


def test_someone_else_sees_it_as_not_theirs_to_answer():
    ApproverFactory(username="amy")
    other = ApproverFactory(username="bob")
    interrupt = ask(assignees=["user:amy"])

    assert envelope(interrupt, other)["answerable"] is False


def test_a_superuser_who_is_not_an_assignee_may_not_answer_it():
    ApproverFactory(username="amy")
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    interrupt = ask(assignees=["user:amy"])

    assert envelope(interrupt, admin)["answerable"] is False


def test_a_signed_quorum_question_says_what_one_answer_cannot_carry():
    ApproverFactory(username="amy")
    ApproverFactory(username="bob")
    interrupt = ask(assignees=["user:amy", "user:bob"], quorum=2, require_signature=True)

    assert envelope(interrupt, UserFactory())["needs"] == ["decisions", "signature"]


def test_a_person_who_voted_may_not_answer_again():
    amy = ApproverFactory(username="amy")
    ApproverFactory(username="bob")
    interrupt = ask(assignees=["user:amy", "user:bob"], quorum=2)
    services.decide(interrupt.pk, {"approved": True}, actor=amy)

    interrupt.refresh_from_db()
    assert envelope(interrupt, amy)["answerable"] is False


def test_a_gate_is_bound_to_the_fingerprint_of_its_action():
    sue = member("sue", "support")
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    interrupt = pending(invocation)

    shown = envelope(interrupt, sue)

    action = json.dumps(
        {"args": {"amount": 40, "customer": "ann"}, "node": "refund"}, separators=(",", ":")
    )
    assert shown["kind"] == "gate"
    assert shown["tool_call_id"] == interrupt.pk
    assert shown["action_fingerprint"] == hashlib.sha256(action.encode()).hexdigest()
    assert shown["answerable"] is True


def test_the_starter_of_a_four_eyes_gate_may_not_answer_it():
    starter = grant_answer(UserFactory(username="stan"), "answer_interrupt")
    invocation = services.start(DELETE, {"record": 7}, user=starter)

    shown = envelope(pending(invocation), starter)

    assert shown["answerable"] is False
    assert shown["needs"] == ["decisions"]


@pytest.mark.parametrize(
    ("interrupt_id", "payload", "message", "schema", "kind"),
    [
        ("call-1", {"name": "lookup", "args": {"q": 1}}, "", None, "tool_call"),
        ("call-2", {"name": "lookup", "args": {}}, "Look it up?", None, "input"),
        ("ask-1", {"name": "x", "args": {}}, "", {"type": "object"}, "input"),
        (effect_question_id("key", "bank", 1), {"effect": "bank"}, "Did it?", None, "in_doubt"),
        (gate_question_id("key"), {"node": "refund", "args": {}}, "Refund?", None, "gate"),
    ],
)
def test_the_kind_of_a_question(interrupt_id, payload, message, schema, kind):
    interrupt = Interrupt(pk=interrupt_id, payload=payload, message=message)
    interrupt.response_schema = schema

    assert question_kind(interrupt) == kind
