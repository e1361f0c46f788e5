"""A real `celery -A tests.project worker` process on PostgreSQL with a Redis or RabbitMQ broker:
start, interrupt, answer through services, complete; and recovery of an answer whose run
task was lost (DESIGN 3.7, issue 3)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.project.celery import app as celery_app
from workflows import services
from workflows.engine import FunctionResponse
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent

from .worker import (
    QUEUE,
    broker_down,
    celery_worker,
    purge,
    queue_length,
    require_postgres,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

EXPENSE = {"amount": 250, "employee": "Ada"}
EXPENSE_PATHS = [
    "test_expense@1",
    "test_expense@1/prepare@1",
    "test_expense@1/manager_approval@1",
    "test_expense@1/decide@1",
    "test_expense@1/reimburse@1",
]
MANAGER_PATH = "test_expense@1/manager_approval@1"
APPROVAL = {"approved": True, "comment": "fine"}


@pytest.fixture
def postgres(transactional_db):
    """Committed rows on PostgreSQL: a worker process reads them from the test database."""
    require_postgres("a worker process must see the test database")


def reload(invocation: Invocation) -> Invocation:
    return Invocation.objects.get(pk=invocation.pk)


def waiting_interrupt(invocation: Invocation) -> Interrupt | None:
    """The pending interrupt once the invocation is WAITING and its run let go of it."""
    row = reload(invocation)
    if row.status != NodeStatus.WAITING or row.lease_owner:
        return None
    return Interrupt.objects.filter(invocation=invocation, status=InterruptStatus.PENDING).first()


def finished(invocation: Invocation) -> Invocation | None:
    row = reload(invocation)
    return row if row.status in (NodeStatus.COMPLETED, NodeStatus.FAILED) else None


def assert_completed_once(invocation: Invocation, interrupt_id: str) -> None:
    """COMPLETED with the reimbursement; each node run completed exactly once, on run_id 1;
    the answer was accepted once and consumed."""
    row = reload(invocation)
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.error == ""
    assert row.output == {
        "status": "reimbursed",
        "reference": f"{invocation.pk}:test_expense@1/reimburse@1",
    }
    assert row.finished_at is not None
    assert row.lease_owner == ""
    assert row.unfinished_deliveries == 0

    runs = {r.path: r for r in NodeRun.objects.filter(invocation=invocation)}
    assert sorted(runs) == sorted(EXPENSE_PATHS)
    for path, run in runs.items():
        assert (run.status, run.run_id, run.attempt, run.error) == (
            NodeStatus.COMPLETED,
            1,
            1,
            "",
        ), path
    assert runs[MANAGER_PATH].output == APPROVAL
    assert runs[MANAGER_PATH].resume_inputs == {interrupt_id: APPROVAL}
    assert runs["test_expense@1/decide@1"].route == "approve"

    events = list(SessionEvent.objects.filter(invocation=invocation).order_by("id"))
    completed = Counter(e.path for e in events if e.status == NodeStatus.COMPLETED)
    assert completed == Counter(EXPENSE_PATHS), "each node run completes exactly once"
    assert not [e for e in events if e.error], "no node failed on the way"
    answers = [e for e in events if e.author == "user"]
    assert len(answers) == 1
    assert answers[0].function_responses == [
        {"id": interrupt_id, "name": "manager_approval", "response": APPROVAL}
    ]
    asked = [e for e in events if e.long_running_tool_ids]
    assert [(e.path, e.long_running_tool_ids) for e in asked] == [(MANAGER_PATH, [interrupt_id])]

    interrupt = Interrupt.objects.get(pk=interrupt_id)
    assert interrupt.status == InterruptStatus.RESOLVED
    assert interrupt.response == APPROVAL
    assert interrupt.consumed
    assert Interrupt.objects.filter(invocation=invocation).count() == 1


@pytest.mark.parametrize("celery_broker", ["redis", "amqp"], indirect=True)
def test_worker_runs_until_interrupt_and_resumes_on_the_answer(postgres, celery_broker):
    with celery_worker(celery_broker) as worker:
        invocation = services.start("test_expense", EXPENSE)
        assert invocation.status == NodeStatus.PENDING  # the worker runs it, not this process

        interrupt = wait_for(lambda: waiting_interrupt(invocation), what="the manager question")
        assert interrupt.path == MANAGER_PATH
        assert interrupt.payload == {**EXPENSE, "amount": 250.0, "needs_manager": True}
        wait_for(lambda: worker.log().count("succeeded") == 1, what="the first task to be acked")
        # The human wait does not sit in the broker: no task is queued while it waits.
        assert queue_length(celery_app, QUEUE) == 0

        accepted = services.submit_function_responses(
            [FunctionResponse(interrupt.id, "manager_approval", APPROVAL)]
        )
        assert accepted.pk == invocation.pk

        done = wait_for(lambda: finished(invocation), what="the invocation to finish")
        assert done.status == NodeStatus.COMPLETED, done.error
        wait_for(lambda: worker.log().count("succeeded") == 2, what="the resume task to be acked")

    assert_completed_once(invocation, interrupt.id)
    log = worker.log()
    assert log.count("Task workflows.tasks.run_invocation[") == 4  # 2 received, 2 succeeded
    assert "ERROR" not in log, log


def test_answer_whose_run_task_was_lost_is_recovered(postgres, celery_broker):
    """No accepted answer is lost: the run task of an answer accepted while no worker runs
    is lost from the broker; the recovery sweep re-enqueues it and a new worker completes
    the invocation."""
    with celery_worker(celery_broker):
        invocation = services.start("test_expense", EXPENSE)
        interrupt = wait_for(lambda: waiting_interrupt(invocation), what="the manager question")

    services.submit_function_responses(
        [FunctionResponse(interrupt.id, "manager_approval", APPROVAL)]
    )
    assert purge(celery_app) == 1, "the resume task was queued, and is now lost"
    stored = Interrupt.objects.get(pk=interrupt.id)
    assert (stored.status, stored.consumed) == (InterruptStatus.RESOLVED, False)
    assert reload(invocation).status == NodeStatus.WAITING

    # A fresh answer is not stalled yet (its own task may still be on the way).
    assert services.recover_stalled() == 0

    with celery_worker(celery_broker):
        later = timezone.now() + timedelta(minutes=5)
        assert services.recover_stalled(now=later) == 1
        done = wait_for(lambda: finished(invocation), what="the recovered invocation to finish")
        assert done.status == NodeStatus.COMPLETED, done.error

    assert_completed_once(invocation, interrupt.id)
    assert services.recover_stalled(now=timezone.now() + timedelta(minutes=5)) == 0


def test_start_and_answer_while_the_broker_is_down_are_not_lost(postgres, celery_broker):
    """DESIGN 3.7: no accepted answer is lost even if the broker is down when it is
    accepted. The services succeed (what they stored is committed), and the recovery sweep
    re-enqueues the runs once the broker is back."""
    with celery_worker(celery_broker):
        with broker_down(celery_broker):
            invocation = services.start("test_expense", EXPENSE)
        assert reload(invocation).status == NodeStatus.PENDING
        assert queue_length(celery_app, QUEUE) == 0, "nothing reached the broker"

        assert services.recover_stalled(now=timezone.now() + timedelta(minutes=5)) == 1
        interrupt = wait_for(lambda: waiting_interrupt(invocation), what="the manager question")

        with broker_down(celery_broker):
            accepted = services.submit_function_responses(
                [FunctionResponse(interrupt.id, "manager_approval", APPROVAL)]
            )
        assert accepted.status == NodeStatus.WAITING
        stored = Interrupt.objects.get(pk=interrupt.id)
        assert (stored.status, stored.consumed) == (InterruptStatus.RESOLVED, False)
        assert queue_length(celery_app, QUEUE) == 0, "nothing reached the broker"

        assert services.recover_stalled(now=timezone.now() + timedelta(minutes=5)) == 1
        done = wait_for(lambda: finished(invocation), what="the recovered invocation to finish")
        assert done.status == NodeStatus.COMPLETED, done.error

    assert_completed_once(invocation, interrupt.id)
