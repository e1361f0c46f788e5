"""Answers racing cancel, and answers racing the deadline sweep, on PostgreSQL (issue 6,
defect 5): one lock order everywhere, so no `deadlock detected` (or any other database
error) reaches a caller; each interrupt ends in exactly one final state, the one its
caller was told; no sweep abandons the rest of its batch.

All the calls of a round are released together by a barrier. Tasks run eagerly on commit
(tests/settings.py), so each accepted answer and each expiry also drives the engine in its
caller's thread, as a worker would, racing the others under the execution lease.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from workflows import services
from workflows.engine import FunctionResponse
from workflows.engine.errors import InterruptNotPendingError, InvocationStateError
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation

pytestmark = pytest.mark.postgres

ROUNDS = 4
ITEMS = [f"item-{n}" for n in range(6)]
THREAD_TIMEOUT = 60.0
EXPIRED_ANSWER = {"approved": False}  # the DefaultResponse of reliability_reviews


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


def race(calls: list[Callable[[], Any]]) -> list[Outcome]:
    """Run each call in its own thread, all released at once by a barrier; the outcome of
    each call, in order. Each thread closes its database connection at its end."""
    barrier = threading.Barrier(len(calls))
    outcomes = [Outcome() for _ in calls]

    def target(call: Callable[[], Any], outcome: Outcome) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            outcome.value = call()
        except BaseException as exc:  # reported by the test
            outcome.error = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=target, args=(call, outcome))
        for call, outcome in zip(calls, outcomes, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    assert not [t for t in threads if t.is_alive()], "a racing call hung"
    return outcomes


def waiting_reviews() -> tuple[Invocation, dict[str, Interrupt]]:
    """A reliability_reviews invocation waiting on one question per item."""
    invocation = services.start("reliability_reviews", ITEMS)
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING
    questions = {i.payload["item"]: i for i in Interrupt.objects.filter(invocation=invocation)}
    assert sorted(questions) == sorted(ITEMS)
    return invocation, questions


def answer_of(item: str) -> dict[str, Any]:
    return {"approved": True, "by": item}


def answering(question: Interrupt) -> Callable[[], Invocation]:
    item = question.payload["item"]
    return lambda: services.submit_function_responses(
        [FunctionResponse(question.id, "review", answer_of(item))]
    )


def unexpected(outcomes: list[Outcome], allowed: tuple[type[BaseException], ...]) -> list[str]:
    return [
        f"{type(o.error).__name__}: {o.error}"
        for o in outcomes
        if o.error is not None and not isinstance(o.error, allowed)
    ]


def test_answers_racing_cancel_each_end_in_one_final_state(postgres):
    for round_ in range(ROUNDS):
        invocation, questions = waiting_reviews()
        items = list(questions)
        calls = [answering(questions[item]) for item in items]
        calls.append(partial(services.cancel, invocation))
        outcomes = race(calls)
        *answers, cancelled = outcomes

        # A late answer is a conflict; a cancel after everything was answered and the
        # invocation completed is refused. Nothing else reaches a caller.
        problems = unexpected(answers, (InterruptNotPendingError,))
        problems += unexpected([cancelled], (InvocationStateError,))
        assert problems == [], f"round {round_}: {problems}"

        row = Invocation.objects.get(pk=invocation.pk)
        assert row.lease_owner == "", f"round {round_}: a lease was left behind"
        for item, outcome in zip(items, answers, strict=True):
            stored = Interrupt.objects.get(pk=questions[item].pk)
            if outcome.error is None:
                assert (stored.status, stored.response) == (
                    InterruptStatus.RESOLVED,
                    answer_of(item),
                ), f"round {round_}: {item} was accepted"
            else:
                assert outcome.error.status == InterruptStatus.CANCELLED
                assert stored.status == InterruptStatus.CANCELLED, f"round {round_}: {item}"
                assert stored.response is None
        if cancelled.error is None:
            assert row.status == NodeStatus.CANCELLED, f"round {round_}: {row.error}"
            assert not Interrupt.objects.filter(
                invocation=invocation, status=InterruptStatus.PENDING
            ).exists()
        else:
            # Every answer won: the invocation completed with all of them.
            assert cancelled.error.status == NodeStatus.COMPLETED
            assert row.status == NodeStatus.COMPLETED, row.error
            assert row.output == [answer_of(item) for item in ITEMS]


def test_answers_racing_the_deadline_sweep_each_end_in_one_final_state(postgres):
    for round_ in range(ROUNDS):
        # Two invocations, so that each sweep has a batch spanning more than one.
        reviews = [waiting_reviews(), waiting_reviews()]
        questions = [q for _, by_item in reviews for q in by_item.values()]
        overdue = timezone.now() + timedelta(hours=2)  # past every deadline
        calls = [answering(q) for q in questions[::2]]  # half of them get an answer
        sweeps = [partial(services.expire_overdue_interrupts, now=overdue)] * 2
        outcomes = race(calls + sweeps)
        answers, swept = outcomes[: len(calls)], outcomes[len(calls) :]

        problems = unexpected(answers, (InterruptNotPendingError,)) + unexpected(swept, ())
        assert problems == [], f"round {round_}: {problems}"

        expired = 0
        for question in questions:
            stored = Interrupt.objects.get(pk=question.pk)
            item = question.payload["item"]
            if stored.status == InterruptStatus.EXPIRED:
                expired += 1
                assert stored.response == EXPIRED_ANSWER, f"round {round_}: {item}"
            else:
                assert (stored.status, stored.response) == (
                    InterruptStatus.RESOLVED,
                    answer_of(item),
                ), f"round {round_}: {item} ends answered or expired"
        for question, outcome in zip(questions[::2], answers, strict=True):
            stored = Interrupt.objects.get(pk=question.pk)
            told = InterruptStatus.RESOLVED if outcome.error is None else outcome.error.status
            assert stored.status == told, f"round {round_}: the caller was told {told}"
        # Nothing abandoned: together the sweeps expired exactly what nobody answered.
        assert sum(o.value for o in swept) == expired
        assert expired >= len(questions) // 2, "every unanswered question expired"

        for invocation, by_item in reviews:
            row = Invocation.objects.get(pk=invocation.pk)
            assert (row.status, row.lease_owner) == (NodeStatus.COMPLETED, ""), row.error
            assert row.output == [
                Interrupt.objects.get(pk=by_item[item].pk).response for item in ITEMS
            ]
