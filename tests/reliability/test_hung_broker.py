"""A hung broker: reachable, accepting connections, never answering (issue 6, "Found under
faults": `start` and `submit_function_responses` blocked indefinitely after their commit).
Publishing is bounded in time by the default settings: both return within ~15 s, what they
stored stays committed, and recovery enqueues the work once the broker answers again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tests.integration.worker import QUEUE, broker_hung, queue_length, wait_for
from tests.project.celery import app as celery_app
from workflows import services
from workflows.engine import FunctionResponse
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

RETURNS_WITHIN = 20.0  # seconds: the issue's ~15 s, with room for a loaded CI machine
GIVE_UP_AFTER = 30.0  # seconds a call may block before the test stops waiting for it


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """Run `call` in a thread; its result and how long it took. Fails the test when it is
    still blocked after GIVE_UP_AFTER seconds (leaving broker_hung then releases it)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc
        finally:
            connection.close()

    began = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(GIVE_UP_AFTER)
    took = time.monotonic() - began
    assert not thread.is_alive(), f"still blocked on the hung broker after {took:.0f} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], took


def recover() -> int:
    """The beat task's recovery, as it runs once the work counts as stalled."""
    return services.recover_stalled(now=timezone.now() + timedelta(minutes=5))


def test_start_and_answer_return_in_bounded_time_with_a_hung_broker(
    postgres, celery_broker, start_worker
):
    start_worker()
    with broker_hung(celery_broker):
        invocation, took_start = timed(
            lambda: services.start("reliability_approval", {"what": "the hung broker"})
        )
    print(f"start returned after {took_start:.1f} s")
    assert took_start < RETURNS_WITHIN
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.PENDING
    assert queue_length(celery_app, QUEUE) == 0, "nothing reached the broker"

    assert recover() == 1
    question = wait_for(
        lambda: Interrupt.objects.filter(
            invocation=invocation, status=InterruptStatus.PENDING
        ).first(),
        what="the question",
    )
    wait_for(lambda: Invocation.objects.get(pk=invocation.pk).lease_owner == "")

    with broker_hung(celery_broker):
        accepted, took_submit = timed(
            lambda: services.submit_function_responses(
                [FunctionResponse(question.id, "approve", {"approved": True})]
            )
        )
    print(f"submit_function_responses returned after {took_submit:.1f} s")
    assert took_submit < RETURNS_WITHIN
    assert accepted.pk == invocation.pk
    stored = Interrupt.objects.get(pk=question.id)
    assert (stored.status, stored.response, stored.consumed) == (
        InterruptStatus.RESOLVED,
        {"approved": True},
        False,
    ), "the answer is stored, waiting for a run"

    assert recover() == 1
    row = wait_for(
        lambda: Invocation.objects.filter(pk=invocation.pk, status=NodeStatus.COMPLETED).first(),
        what="the recovered invocation to complete",
    )
    assert (row.output, row.error) == ({"approved": True}, "")
    assert Interrupt.objects.get(pk=question.id).consumed
