"""Escalation ladders (DESIGN 4.3): the sweep applies each due step exactly once, in order,
never after the question is answered; a hand-over changes who may answer at once; each
step is audited in its transaction and signalled after it commits."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import transaction
from rest_framework.test import APIClient

from approvals.models import inbox
from tests.asking import APPROVAL, WORKFLOW, ask
from workflows import services
from workflows.audit import trail
from workflows.engine import Escalation, FunctionResponse
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Interrupt, Invocation
from workflows.services import sweeps as escalation
from workflows.signals import interrupt_escalated

from .conftest import DIRECTORS, HAND_OVER_AFTER, MANAGERS, REMIND_AFTER, member

pytestmark = pytest.mark.django_db(transaction=True)

SECOND = timedelta(seconds=1)


@pytest.fixture
def signalled() -> Any:
    """The (interrupt_id, step) of each interrupt_escalated sent, in order."""
    sent: list[tuple[str, int]] = []

    def receiver(sender: Any, interrupt_id: str, step: int, **kwargs: Any) -> None:
        sent.append((interrupt_id, step))

    interrupt_escalated.connect(receiver)
    yield sent
    interrupt_escalated.disconnect(receiver)


def fresh(interrupt: Interrupt) -> Interrupt:
    return Interrupt.objects.select_related("invocation").get(pk=interrupt.pk)


def escalation_entries(interrupt: Interrupt) -> list[tuple[str, dict]]:
    rows = AuditEntry.objects.filter(
        interrupt_id=interrupt.pk, action__in=["interrupt.escalated", "interrupt.reminded"]
    ).order_by("id")
    return [(row.action, row.data) for row in rows]


def asked(interrupt: Interrupt) -> Any:
    """When the question was asked, as its first step's due time says."""
    return interrupt.next_escalation_at - REMIND_AFTER


def sweep(at: Any) -> int:
    return services.escalate_interrupts(now=at)


# --- each step once, in order ------------------------------------------------------------


def test_a_question_is_asked_with_its_first_step_due(laddered):
    question = laddered()
    assert (question.escalation_step, len(question.escalation)) == (0, 2)
    assert abs(question.next_escalation_at - question.created_at - REMIND_AFTER) < SECOND
    assert sweep(question.next_escalation_at - SECOND) == 0
    assert escalation_entries(question) == []


def test_a_reminder_changes_nothing_but_the_ladder_and_is_audited(laddered, signalled):
    question = laddered()
    assert sweep(question.next_escalation_at) == 1
    stored = fresh(question)
    assert (stored.status, stored.assignees) == (InterruptStatus.PENDING, [MANAGERS])
    assert stored.escalation_step == 1
    assert stored.next_escalation_at == asked(question) + HAND_OVER_AFTER
    assert escalation_entries(question) == [
        ("interrupt.reminded", {"step": 0, "assignees": [MANAGERS]})
    ]
    assert signalled == [(question.pk, 0)]


def test_each_step_applies_once_however_often_the_sweep_runs(laddered, signalled):
    question = laddered()
    reminded_at = question.next_escalation_at
    applied = [sweep(reminded_at) for _ in range(5)]
    handed_over_at = fresh(question).next_escalation_at
    applied += [sweep(handed_over_at) for _ in range(5)]
    applied += [sweep(handed_over_at + timedelta(days=30)) for _ in range(3)]
    assert applied == [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert [action for action, _ in escalation_entries(question)] == [
        "interrupt.reminded",
        "interrupt.escalated",
    ]
    assert signalled == [(question.pk, 0), (question.pk, 1)]
    stored = fresh(question)
    assert (stored.escalation_step, stored.next_escalation_at) == (2, None)


def test_several_overdue_steps_apply_in_order_each_audited(laddered, signalled):
    question = laddered()
    assert sweep(asked(question) + timedelta(days=2)) == 2
    assert escalation_entries(question) == [
        ("interrupt.reminded", {"step": 0, "assignees": [MANAGERS]}),
        (
            "interrupt.escalated",
            {"step": 1, "assignees": [DIRECTORS], "previous": [MANAGERS], "claimed_by": None},
        ),
    ]
    assert signalled == [(question.pk, 0), (question.pk, 1)]
    stored = fresh(question)
    assert (stored.assignees, stored.escalation_step, stored.next_escalation_at) == (
        [DIRECTORS],
        2,
        None,
    )


def test_steps_with_the_same_delay_apply_together_in_their_order(laddered):
    one_hour = timedelta(hours=1)
    question = laddered(
        escalation=[
            Escalation(after=one_hour, assignees=["user:dora"]),
            Escalation(after=one_hour, assignees=[DIRECTORS], remind=True),
        ]
    )
    assert sweep(question.next_escalation_at) == 2
    assert [data["assignees"] for _, data in escalation_entries(question)] == [
        ["user:dora"],
        [DIRECTORS],
    ]
    assert fresh(question).assignees == [DIRECTORS]


def test_the_sweep_takes_a_bounded_batch_most_overdue_first(laddered, monkeypatch):
    monkeypatch.setattr(escalation, "SWEEP_BATCH", 2)
    reminder = [Escalation(after=REMIND_AFTER, remind=True)]
    questions = [laddered(escalation=reminder) for _ in range(3)]
    later = max(q.next_escalation_at for q in questions) + SECOND
    assert sweep(later) == 2
    assert [fresh(q).escalation_step for q in questions] == [1, 1, 0]
    assert sweep(later) == 1


# --- never after an answer ---------------------------------------------------------------


def test_no_step_applies_to_an_answered_question(laddered, manager):
    question = laddered()
    services.decide(question.pk, {"approved": True}, actor=manager)
    assert sweep(asked(question) + timedelta(days=2)) == 0
    stored = fresh(question)
    assert (stored.status, stored.assignees) == (InterruptStatus.RESOLVED, [MANAGERS])
    assert stored.escalation_step == 0
    assert escalation_entries(question) == []


def test_an_answer_between_the_listing_and_the_lock_wins(laddered, manager, monkeypatch):
    # The sweep lists the question pending; an answer commits before the sweep locks it.
    question = laddered()
    real_lock = escalation.locked_interrupt

    def answered_first(interrupt_id: str) -> Interrupt:
        services.submit_function_responses(
            [FunctionResponse(interrupt_id, "question", {"approved": True})], actor=manager
        )
        return real_lock(interrupt_id)

    monkeypatch.setattr(escalation, "locked_interrupt", answered_first)
    assert sweep(asked(question) + timedelta(days=2)) == 0
    stored = fresh(question)
    assert (stored.status, stored.assignees, stored.escalation_step) == (
        InterruptStatus.RESOLVED,
        [MANAGERS],
        0,
    )
    assert escalation_entries(question) == []


def test_a_cancelled_question_is_not_escalated(laddered, manager):
    question = laddered()
    services.cancel(question.invocation)
    assert sweep(asked(question) + timedelta(days=2)) == 0
    assert escalation_entries(question) == []


# --- a hand-over changes who may answer at once ----------------------------------------------


def api_inbox(user: Any) -> set[str]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.get("/api/interrupts/?status=pending")
    assert response.status_code == 200, response.json()
    return {row["id"] for row in response.json()["results"]}


def test_a_hand_over_moves_the_question_to_the_new_assignees(laddered, manager, director):
    question = laddered()
    services.claim(question.pk, actor=manager)
    assert manager.has_perm("workflows.answer_interrupt", fresh(question))
    assert not director.has_perm("workflows.answer_interrupt", fresh(question))
    assert api_inbox(manager) == {question.pk} and api_inbox(director) == set()

    assert sweep(asked(question) + HAND_OVER_AFTER) == 2
    stored = fresh(question)
    assert stored.claimed_by is None, "the managers' claim does not follow the question"
    assert escalation_entries(question)[-1][1]["claimed_by"] == "mia"
    manager, director = (type(u).objects.get(pk=u.pk) for u in (manager, director))
    assert not manager.has_perm("workflows.answer_interrupt", stored)
    assert director.has_perm("workflows.answer_interrupt", stored)
    assert api_inbox(manager) == set() and api_inbox(director) == {question.pk}
    assert list(inbox(manager)) == [] and [i.pk for i in inbox(director)] == [question.pk]
    with pytest.raises(PermissionDenied):
        services.decide(question.pk, {"approved": True}, actor=manager)
    decision = services.decide(question.pk, {"approved": True}, actor=director)
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert Invocation.objects.get(pk=question.invocation_id).status == NodeStatus.COMPLETED


def test_a_hand_over_keeps_the_decisions_so_far(manager, director):
    second_manager = member("max", MANAGERS)
    second_director = member("dan", DIRECTORS)
    question = ask(
        response_schema=APPROVAL,
        assignees=[MANAGERS],
        quorum=2,
        escalation=[Escalation(after=REMIND_AFTER, assignees=[DIRECTORS])],
    )
    services.decide(question.pk, {"approved": True}, actor=manager)
    assert sweep(question.next_escalation_at) == 1
    assert fresh(question).assignees == [DIRECTORS]
    # One approval recorded by a manager, one more from a director settles it.
    decision = services.decide(question.pk, {"approved": True}, actor=director)
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert {second_manager.username, second_director.username} == {"max", "dan"}


@pytest.mark.parametrize(
    ("new_assignees", "why"),
    [
        (["group:nobody-here"], "no such group:nobody-here"),
        (["user:dora"], "quorum 2 cannot be met"),
    ],
)
def test_a_hand_over_that_would_strand_the_question_keeps_its_assignees(
    manager, director, new_assignees, why
):
    member("max", MANAGERS)
    question = ask(
        response_schema=APPROVAL,
        assignees=[MANAGERS],
        quorum=2,
        escalation=[
            Escalation(after=REMIND_AFTER, assignees=new_assignees),
            Escalation(after=HAND_OVER_AFTER, remind=True),
        ],
    )
    assert sweep(question.next_escalation_at) == 1
    stored = fresh(question)
    assert stored.assignees == [MANAGERS], "still answerable by who could answer it"
    assert stored.escalation_step == 1, "the step counts as applied: the ladder moves on"
    ((action, data),) = escalation_entries(question)
    assert action == "interrupt.escalated"
    assert data["assignees"] == data["previous"] == [MANAGERS]
    assert why in data["refused"]


# --- audited in the transaction, signalled after it ---------------------------------------------


def test_the_signal_waits_for_the_commit(laddered, signalled):
    question = laddered()
    with transaction.atomic():  # the sweep's transaction, inside a caller's
        assert sweep(question.next_escalation_at) == 1
        assert signalled == [], "nothing is signalled before the step commits"
    assert signalled == [(question.pk, 0)]


def test_a_step_rolled_back_is_not_signalled(laddered, signalled):
    question = laddered()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert sweep(question.next_escalation_at) == 1
        raise RuntimeError("the caller's transaction fails")
    assert signalled == [] and escalation_entries(question) == []
    assert fresh(question).escalation_step == 0


def test_a_step_whose_audit_entry_fails_is_undone_and_not_signalled(
    laddered, monkeypatch, signalled
):
    question = laddered()
    real = trail.record

    def record_then_fail(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError("the audit trail is down")

    monkeypatch.setattr(trail, "record", record_then_fail)
    assert sweep(asked(question) + timedelta(days=2)) == 0
    stored = fresh(question)
    assert (stored.assignees, stored.escalation_step) == ([MANAGERS], 0)
    assert stored.next_escalation_at == question.next_escalation_at
    assert escalation_entries(question) == [] and signalled == []

    monkeypatch.setattr(trail, "record", real)  # the next sweep applies what is due
    assert sweep(asked(question) + timedelta(days=2)) == 2
    assert signalled == [(question.pk, 0), (question.pk, 1)]


def test_one_failing_question_does_not_stop_the_others(laddered, monkeypatch, caplog):
    broken, healthy = laddered(), laddered()
    real = escalation._apply_step

    def failing_for_broken(interrupt: Interrupt) -> None:
        if interrupt.pk == broken.pk:
            raise RuntimeError("boom")
        real(interrupt)

    monkeypatch.setattr(escalation, "_apply_step", failing_for_broken)
    assert sweep(asked(healthy) + REMIND_AFTER) == 1
    assert fresh(healthy).escalation_step == 1 and fresh(broken).escalation_step == 0
    assert f"escalating interrupt {broken.pk}" in caplog.text


# --- run periodically ---------------------------------------------------------------------


def test_hitl_periodic_applies_due_steps(laddered):
    question = laddered()
    # As if asked REMIND_AFTER ago: the reminder is due, the hand-over not yet.
    Interrupt.objects.filter(pk=question.pk).update(
        next_escalation_at=question.next_escalation_at - REMIND_AFTER
    )
    out = StringIO()
    call_command("hitl_periodic", "--once", stdout=out)
    assert "applied 1 escalation step(s)" in out.getvalue()
    assert fresh(question).escalation_step == 1


# --- bad ladders fail the node that asks -------------------------------------------------------


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"priority": "critical"}, "priority must be one of low, normal, high, urgent"),
        ({"due": 0}, "due must be a positive timedelta"),
        ({"escalation": [{"after": -60, "remind": True}]}, "escalation after must be a positive"),
        (
            {"escalation": [{"after": 600, "remind": True}, {"after": 60, "remind": True}]},
            "escalation steps must be in order of `after`",
        ),
        ({"escalation": [{"after": 60}]}, "an escalation step must remind or name new assignees"),
    ],
)
def test_a_bad_priority_due_or_ladder_fails_the_node_with_a_clear_error(request_fields, message):
    request = {"message": "Approve?", "response_schema": APPROVAL, **request_fields}
    invocation = services.start(WORKFLOW, {"request": request})
    stored = Invocation.objects.get(pk=invocation.pk)
    assert stored.status == NodeStatus.FAILED
    assert message in stored.error
    assert not Interrupt.objects.filter(invocation=invocation).exists()
