"""Deadlines and the poison guard through services (DESIGN 3.6, 3.7; issue 3). Runs on the
default database (SQLite or PostgreSQL); tasks run eagerly on commit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from workflows import dispatch, services, signals
from workflows.engine import (
    DefaultResponse,
    FunctionResponse,
    InterruptNotPendingError,
    RequestInput,
    Workflow,
    node,
)
from workflows.engine.context import new_id
from workflows.engine.runner import Runner
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent
from workflows.registry import registry

from .worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

DECISION = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}
ASK_PATH = "deadline@1/ask@1"


def deadline_workflow(**request: Any) -> Workflow:
    """START -> ask (an interrupt with a 1 s deadline) -> decide."""

    @node(name="ask")
    def ask(node_input):
        return RequestInput(
            message=f"Approve {node_input['what']}?",
            response_schema=DECISION,
            timeout=timedelta(seconds=1),
            **request,
        )

    @node
    def decide(node_input):
        return {"approved": node_input["approved"]}

    return Workflow(name="deadline", edges=[("START", ask, decide)])


@pytest.fixture
def register_workflow() -> Iterator[Callable[[Workflow], None]]:
    names: list[str] = []

    def add(workflow: Workflow) -> None:
        registry.register(workflow)
        names.append(workflow.name)

    yield add
    for name in names:
        registry.unregister(name)


@pytest.fixture
def finished() -> Iterator[list[dict[str, Any]]]:
    receipts: list[dict[str, Any]] = []
    signals.invocation_finished.connect(
        lambda sender, **kw: receipts.append(kw), weak=False, dispatch_uid="test-expiry"
    )
    yield receipts
    signals.invocation_finished.disconnect(dispatch_uid="test-expiry")


def reload(invocation: Invocation) -> Invocation:
    return Invocation.objects.get(pk=invocation.pk)


def pending(invocation: Invocation) -> list[Interrupt]:
    return list(Interrupt.objects.filter(invocation=invocation, status=InterruptStatus.PENDING))


def test_overdue_interrupt_expires_once_and_the_default_answer_applies(register_workflow, finished):
    register_workflow(deadline_workflow(on_timeout=DefaultResponse({"approved": False})))
    invocation = services.start("deadline", {"what": "the trip"})
    assert reload(invocation).status == NodeStatus.WAITING
    (interrupt,) = pending(invocation)
    assert interrupt.deadline is not None
    asked_for = interrupt.deadline - interrupt.created_at
    assert timedelta(seconds=0.5) < asked_for < timedelta(seconds=1.5)

    just_before = interrupt.deadline - timedelta(milliseconds=1)
    assert services.expire_overdue_interrupts(now=just_before) == 0
    assert reload(invocation).status == NodeStatus.WAITING

    later = interrupt.deadline + timedelta(seconds=5)
    assert services.expire_overdue_interrupts(now=later) == 1
    assert services.expire_overdue_interrupts(now=later) == 0, "expired exactly once"

    row = reload(invocation)
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.output == {"approved": False}
    stored = Interrupt.objects.get(pk=interrupt.pk)
    assert (stored.status, stored.response, stored.consumed) == (
        InterruptStatus.EXPIRED,
        {"approved": False},
        True,
    )
    timeouts = SessionEvent.objects.filter(invocation=invocation, author="timeout")
    assert [e.function_responses for e in timeouts] == [
        [{"id": interrupt.pk, "name": "timeout", "response": {"approved": False}}]
    ]
    assert not SessionEvent.objects.filter(invocation=invocation, author="user").exists()
    ask = NodeRun.objects.get(invocation=invocation, path=ASK_PATH)
    assert (ask.status, ask.output) == (NodeStatus.COMPLETED, {"approved": False})
    assert [r["status"] for r in finished if r["invocation_id"] == str(invocation.pk)] == [
        "COMPLETED"
    ]

    # A late answer to the expired question is a conflict; nothing is stored.
    with pytest.raises(InterruptNotPendingError) as late:
        services.submit_function_responses(
            [FunctionResponse(interrupt.pk, "ask", {"approved": True})]
        )
    assert late.value.status == InterruptStatus.EXPIRED
    assert not SessionEvent.objects.filter(invocation=invocation, author="user").exists()
    assert reload(invocation).output == {"approved": False}


def test_overdue_interrupt_with_fail_policy_fails_the_invocation(register_workflow, finished):
    register_workflow(deadline_workflow())  # on_timeout defaults to "fail"
    invocation = services.start("deadline", {"what": "the laptop"})
    (interrupt,) = pending(invocation)

    later = interrupt.deadline + timedelta(seconds=5)
    assert services.expire_overdue_interrupts(now=later) == 1
    assert services.expire_overdue_interrupts(now=later) == 0, "expired exactly once"

    row = reload(invocation)
    assert row.status == NodeStatus.FAILED
    assert interrupt.pk in row.error, "the error names the interrupt"
    assert row.finished_at is not None
    stored = Interrupt.objects.get(pk=interrupt.pk)
    assert stored.status == InterruptStatus.EXPIRED
    ask = NodeRun.objects.get(invocation=invocation, path=ASK_PATH)
    assert ask.status == NodeStatus.FAILED
    assert interrupt.pk in ask.error
    assert [r["status"] for r in finished if r["invocation_id"] == str(invocation.pk)] == ["FAILED"]

    with pytest.raises(InterruptNotPendingError) as late:
        services.submit_function_responses(
            [FunctionResponse(interrupt.pk, "ask", {"approved": True})]
        )
    assert late.value.status == InterruptStatus.EXPIRED
    assert not SessionEvent.objects.filter(invocation=invocation, author="user").exists()
    assert reload(invocation).status == NodeStatus.FAILED


def test_retry_after_a_deadline_failure_asks_again(register_workflow, finished):
    register_workflow(deadline_workflow())  # on_timeout defaults to "fail"
    invocation = services.start("deadline", {"what": "the laptop"})
    (interrupt,) = pending(invocation)
    later = interrupt.deadline + timedelta(seconds=5)
    assert services.expire_overdue_interrupts(now=later) == 1
    assert reload(invocation).status == NodeStatus.FAILED

    services.retry(invocation)
    row = reload(invocation)
    assert row.status == NodeStatus.WAITING, row.error
    assert row.error == ""
    (again,) = pending(invocation)
    assert again.pk != interrupt.pk, "retry asks a new question"
    assert again.path == ASK_PATH
    assert again.deadline is not None
    ask = NodeRun.objects.get(invocation=invocation, path=ASK_PATH)
    assert (ask.status, ask.attempt) == (NodeStatus.WAITING, 2)
    assert ask.interrupt_ids == [again.pk], "the run waits on the new question only"

    services.submit_function_responses([FunctionResponse(again.pk, "ask", {"approved": True})])
    row = reload(invocation)
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.output == {"approved": True}
    assert [r["status"] for r in finished if r["invocation_id"] == str(invocation.pk)] == [
        "FAILED",
        "COMPLETED",
    ]


@pytest.fixture
def enqueued(monkeypatch) -> list[list[Any]]:
    """Record run tasks instead of running them: the test plays the worker."""
    calls: list[list[Any]] = []
    monkeypatch.setattr(dispatch, "send_run", lambda pk: calls.append([str(pk)]))
    return calls


LEASE = 0.5  # seconds: HITL["LEASE_SECONDS"] of the poison-guard tests, to let leases expire


def asking_workflow() -> Workflow:
    """START -> ask (one question)."""

    @node(name="ask")
    def ask(node_input):
        return RequestInput(message="Approve?", response_schema=DECISION)

    return Workflow(name="poison", edges=[("START", ask)])


@contextmanager
def killed_after_taking_the_lease() -> Iterator[None]:
    """Deliveries inside the block die right after their run took the execution lease, as
    under SIGKILL: nothing more runs, and the lease is neither renewed nor given back."""

    async def dies_holding_the_lease(self: Runner, invocation_id: str, **kwargs: Any) -> None:
        assert await self.store.acquire_lease(invocation_id, new_id(), self.lease_ttl)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Runner, "advance", dies_holding_the_lease)
        yield


def lease_expired(invocation: Invocation) -> None:
    """Wait until the run holding the invocation's lease has really lost it."""
    expires = reload(invocation).lease_expires_at
    assert expires is not None, "a run holds the lease"
    wait_for(lambda: timezone.now() > expires, what="the lease to expire")


@override_settings(HITL={"MAX_DELIVERIES": 3, "LEASE_SECONDS": LEASE})
def test_poison_guard_fails_an_invocation_whose_runs_never_finish(
    register_workflow, enqueued, finished
):
    register_workflow(asking_workflow())
    invocation = services.start("poison", {})
    assert enqueued == [[str(invocation.pk)]]
    assert reload(invocation).status == NodeStatus.PENDING

    # Three runs die holding the execution lease (their worker is killed each time): the
    # second and the third delivery each take over the lease the previous one left.
    with killed_after_taking_the_lease():
        for _ in range(3):
            services.execute(str(invocation.pk))
            lease_expired(invocation)
    assert reload(invocation).unfinished_deliveries == 2

    # The next delivery counts the third and gives up instead of running again.
    services.execute(str(invocation.pk))
    row = reload(invocation)
    assert row.status == NodeStatus.FAILED
    assert "gave up after 3 runs that never finished" in row.error
    assert "MAX_DELIVERIES" in row.error
    assert row.finished_at is not None
    assert not NodeRun.objects.filter(invocation=invocation).exists(), "nothing ran again"
    assert [r["status"] for r in finished if r["invocation_id"] == str(invocation.pk)] == ["FAILED"]

    services.execute(str(invocation.pk))  # a late redelivery changes nothing
    assert reload(invocation).error == row.error


@override_settings(HITL={"MAX_DELIVERIES": 3, "LEASE_SECONDS": LEASE})
def test_poison_guard_counts_neither_finished_nor_concurrent_runs(register_workflow, enqueued):
    register_workflow(asking_workflow())
    invocation = services.start("poison", {})
    db = services.store()

    # Two runs died holding the lease; the second delivery counted the first.
    with killed_after_taking_the_lease():
        for _ in range(2):
            services.execute(str(invocation.pk))
            lease_expired(invocation)
    assert reload(invocation).unfinished_deliveries == 1

    # A live run holds the lease: a delivery meanwhile leaves the work to it and counts
    # nothing.
    assert db.acquire_lease_sync(str(invocation.pk), "live-run", LEASE * 20)
    services.execute(str(invocation.pk))
    row = reload(invocation)
    assert (row.status, row.unfinished_deliveries) == (NodeStatus.PENDING, 1)
    assert row.lease_owner == "live-run"
    assert not NodeRun.objects.filter(invocation=invocation).exists()

    # The live run finishes and gives the lease back: the next delivery runs to the
    # question and, having finished, resets the count.
    db.release_lease_sync(str(invocation.pk), "live-run")
    services.execute(str(invocation.pk))
    row = reload(invocation)
    assert row.status == NodeStatus.WAITING, row.error
    assert (row.unfinished_deliveries, row.lease_owner) == (0, "")
    assert len(pending(invocation)) == 1
