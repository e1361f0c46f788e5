"""Escalation sweeps racing each other and racing answers, on PostgreSQL (DESIGN 4.3):
each step applies exactly once however many sweeps run at once, and an answer racing a
step is wholly before it or wholly after it. The calls of a round start together at a
barrier; answers drive the engine in their own thread as a worker would (eager tasks)."""

from __future__ import annotations

import threading
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from tests.asking import ask
from tests.integration.worker import require_postgres
from tests.reliability.test_lock_order import race
from workflows import services
from workflows.engine import Escalation, FunctionResponse
from workflows.engine.status import InterruptStatus
from workflows.models import AuditEntry, Interrupt
from workflows.signals import interrupt_escalated

from .conftest import DIRECTORS, LADDER, MANAGERS, REMIND_AFTER

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 5
QUESTIONS = 6


@pytest.fixture(autouse=True)
def postgres() -> None:
    require_postgres("row locks between threads")


@pytest.fixture
def signalled() -> Any:
    sent: list[tuple[str, int]] = []
    lock = threading.Lock()

    def receiver(sender: Any, interrupt_id: str, step: int, **kwargs: Any) -> None:
        with lock:
            sent.append((interrupt_id, step))

    interrupt_escalated.connect(receiver)
    yield sent
    interrupt_escalated.disconnect(receiver)


def entries(interrupt: Interrupt) -> list[tuple[str, int]]:
    rows = AuditEntry.objects.filter(
        interrupt_id=interrupt.pk, action__in=["interrupt.escalated", "interrupt.reminded"]
    ).order_by("id")
    return [(row.action, row.data["step"]) for row in rows]


def test_sweeps_at_once_apply_each_step_once(manager, director, signalled):
    for round_ in range(ROUNDS):
        questions = [ask(assignees=[MANAGERS], escalation=LADDER) for _ in range(QUESTIONS)]
        later = max(q.next_escalation_at for q in questions) + timedelta(days=2)
        outcomes = race([partial(services.escalate_interrupts, now=later)] * 3)
        assert [o.error for o in outcomes] == [None] * 3, f"round {round_}"
        assert sum(o.value for o in outcomes) == 2 * QUESTIONS, f"round {round_}"
        for question in questions:
            stored = Interrupt.objects.get(pk=question.pk)
            assert (stored.escalation_step, stored.assignees) == (2, [DIRECTORS])
            assert entries(question) == [
                ("interrupt.reminded", 0),
                ("interrupt.escalated", 1),
            ], f"round {round_}: each step once, in order"
    assert len(signalled) == len(set(signalled)) == 2 * QUESTIONS * ROUNDS


def test_an_answer_racing_a_step_is_before_it_or_after_it(manager, director):
    hand_over = [Escalation(after=REMIND_AFTER, assignees=[DIRECTORS])]
    seen = set()
    for round_ in range(ROUNDS):
        questions = [ask(assignees=[MANAGERS], escalation=hand_over) for _ in range(QUESTIONS)]
        later = max(q.next_escalation_at for q in questions)
        answers = [
            partial(
                services.submit_function_responses,
                [FunctionResponse(q.pk, "question", {"approved": True})],
                actor=manager,
            )
            for q in questions
        ]
        outcomes = race([*answers, partial(services.escalate_interrupts, now=later)])
        *answered, swept = outcomes
        assert swept.error is None, f"round {round_}: {swept.error!r}"
        handed_over = 0
        for question, outcome in zip(questions, answered, strict=True):
            stored = Interrupt.objects.get(pk=question.pk)
            if outcome.error is None:  # the answer came first: the step never applies
                seen.add("answer first")
                assert (stored.status, stored.assignees, stored.escalation_step) == (
                    InterruptStatus.RESOLVED,
                    [MANAGERS],
                    0,
                ), f"round {round_}"
                assert entries(question) == []
            else:  # the step came first: the managers may no longer answer
                seen.add("step first")
                handed_over += 1
                assert isinstance(outcome.error, PermissionDenied), repr(outcome.error)
                assert (stored.status, stored.assignees, stored.escalation_step) == (
                    InterruptStatus.PENDING,
                    [DIRECTORS],
                    1,
                ), f"round {round_}"
                assert entries(question) == [("interrupt.escalated", 0)]
        assert swept.value == handed_over, f"round {round_}"
    assert seen, "every question ends one way or the other"
