"""Concurrent answers on PostgreSQL (issue 3, DESIGN 3.7): 50 threads submitting the same
answer, and 20 threads answering the 20 items of a parallel worker at once.

Tasks run eagerly in-process on commit (tests/settings.py), so every thread's submission
also drives the engine; the execution lease makes the threads take turns.
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from workflows import services, signals
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent

from .worker import require_postgres

pytestmark = pytest.mark.postgres

DECISION = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "by": {"type": "string"}},
    "required": ["approved"],
    "additionalProperties": False,
}
ITEM_ANSWER = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["item", "score"],
}
THREAD_TIMEOUT = 60.0


@pytest.fixture
def postgres(transactional_db):
    """Real row locks and concurrent connections: PostgreSQL only."""
    require_postgres("row locks and concurrent connections")


class NodeCounter:
    """Counts node-body executions across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, key: str) -> None:
        with self.lock:
            self.counts[key] += 1


@pytest.fixture
def finished_signals() -> Iterator[list[dict[str, Any]]]:
    """Every invocation_finished receipt (from any thread)."""
    receipts: list[dict[str, Any]] = []
    lock = threading.Lock()

    def receiver(sender: Any, **kwargs: Any) -> None:
        with lock:
            receipts.append(kwargs)

    signals.invocation_finished.connect(receiver, weak=False, dispatch_uid="test-concurrency")
    yield receipts
    signals.invocation_finished.disconnect(dispatch_uid="test-concurrency")


def describe(errors: list[BaseException]) -> str:
    """The first error with its traceback, for an assertion message."""
    if not errors:
        return "no error"
    first = "".join(traceback.format_exception(errors[0]))
    return f"{len(errors)} thread(s) raised; the first:\n{first}"


def run_at_once(calls: list[Callable[[], Any]]) -> tuple[list[Any], list[BaseException]]:
    """Run each call in its own thread, all released together by a barrier; return the
    results and the exceptions. Each thread closes its database connection at its end."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def target(call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            result = call()
            with lock:
                results.append(result)
        except BaseException as exc:  # reported by the test
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    assert not [t for t in threads if t.is_alive()], "a submitting thread hung"
    return results, errors


def completed_events(invocation: Invocation) -> Counter[str]:
    events = SessionEvent.objects.filter(invocation=invocation, status=NodeStatus.COMPLETED)
    return Counter(events.values_list("path", flat=True))


def test_fifty_threads_submitting_the_same_answer(postgres, register_workflow, finished_signals):
    counter = NodeCounter()

    @node(name="approve", rerun_on_resume=True)
    def approve(ctx, node_input):
        if not ctx.resume_inputs:
            counter.add("asked")
            return RequestInput(
                message=f"Approve order {node_input['order']}?", response_schema=DECISION
            )
        counter.add("resumed")  # the body runs again on resume, with the answer
        (answer,) = ctx.resume_inputs.values()
        return {"order": node_input["order"], "decision": answer}

    @node
    def ship(node_input):
        counter.add("ship")
        return {"shipped": node_input["decision"]["approved"], "order": node_input["order"]}

    register_workflow(Workflow(name="same_answer_race", edges=[("START", approve, ship)]))

    invocation = services.start("same_answer_race", {"order": 7})
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING
    interrupt = Interrupt.objects.get(invocation=invocation)
    answer = {"approved": True, "by": "ops"}

    def submit() -> Invocation:
        return services.submit_function_responses(
            [FunctionResponse(interrupt.id, "approve", answer)]
        )

    results, errors = run_at_once([submit] * 50)

    assert errors == [], f"every repeat of the accepted answer is a success: {describe(errors)}"
    assert len(results) == 50
    assert {r.pk for r in results} == {invocation.pk}

    row = Invocation.objects.get(pk=invocation.pk)
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.output == {"shipped": True, "order": 7}
    assert row.lease_owner == ""

    stored = Interrupt.objects.get(pk=interrupt.id)
    assert (stored.status, stored.response, stored.consumed) == (
        InterruptStatus.RESOLVED,
        answer,
        True,
    )
    assert stored.resolved_at is not None
    user_events = SessionEvent.objects.filter(invocation=invocation, author="user")
    assert user_events.count() == 1, "exactly one submission was accepted"
    assert user_events.get().function_responses == [
        {"id": interrupt.id, "name": "approve", "response": answer}
    ]

    assert counter.counts == {"asked": 1, "resumed": 1, "ship": 1}, (
        "the node body ran once on resume, and its successor once"
    )
    runs = {r.path: r for r in NodeRun.objects.filter(invocation=invocation)}
    assert runs["same_answer_race@1/approve@1"].status == NodeStatus.COMPLETED
    assert runs["same_answer_race@1/approve@1"].attempt == 1
    assert completed_events(invocation) == Counter(runs.keys()), "each node run completed once"
    mine = [r for r in finished_signals if r["invocation_id"] == str(invocation.pk)]
    assert [r["status"] for r in mine] == ["COMPLETED"]


def test_twenty_different_answers_to_one_parallel_worker_at_once(
    postgres, register_workflow, finished_signals
):
    counter = NodeCounter()

    @node(name="review", parallel_worker=True)
    def review(node_input):
        counter.add(node_input)
        return RequestInput(
            message=f"Score {node_input}", payload={"item": node_input}, response_schema=ITEM_ANSWER
        )

    register_workflow(Workflow(name="parallel_answers", edges=[("START", review)]))

    items = [f"item-{n:02d}" for n in (7, 3, 19, 0, 12, 5, 16, 1, 9, 14, 2, 18, 6, 11, 4, 17)]
    items += ["item-08", "item-10", "item-13", "item-15"]
    assert len(set(items)) == 20
    invocation = services.start("parallel_answers", items)
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING
    interrupts = {i.payload["item"]: i for i in Interrupt.objects.filter(invocation=invocation)}
    assert sorted(interrupts) == sorted(items)
    answers = {item: {"item": item, "score": int(item[-2:]) * 10} for item in items}

    def submitter(item: str) -> Callable[[], Invocation]:
        def submit() -> Invocation:
            response = FunctionResponse(interrupts[item].id, "review", answers[item])
            return services.submit_function_responses([response])

        return submit

    results, errors = run_at_once([submitter(item) for item in items])

    assert errors == [], f"every answer is accepted: {describe(errors)}"
    assert len(results) == 20

    row = Invocation.objects.get(pk=invocation.pk)
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.output == [answers[item] for item in items], "results in input order"
    assert row.lease_owner == ""

    stored = Interrupt.objects.filter(invocation=invocation)
    assert stored.count() == 20
    for interrupt in stored:
        item = interrupt.payload["item"]
        assert (interrupt.status, interrupt.response, interrupt.consumed) == (
            InterruptStatus.RESOLVED,
            answers[item],
            True,
        ), item
    user_events = SessionEvent.objects.filter(invocation=invocation, author="user")
    assert sorted(e.function_responses[0]["response"]["item"] for e in user_events) == sorted(
        items
    ), "each answer accepted exactly once"

    assert counter.counts == dict.fromkeys(items, 1), "each item asked once, never re-run"
    runs = {r.path: r for r in NodeRun.objects.filter(invocation=invocation)}
    worker_path = "parallel_answers@1/review@1"
    item_paths = [f"{worker_path}/review@{n}" for n in range(1, 21)]
    assert sorted(runs) == sorted(["parallel_answers@1", worker_path, *item_paths])
    for index, item in enumerate(items):
        run = runs[item_paths[index]]
        assert (run.status, run.input, run.output) == (NodeStatus.COMPLETED, item, answers[item])
    assert completed_events(invocation) == Counter(runs.keys()), "each node run completed once"

    mine = [r for r in finished_signals if r["invocation_id"] == str(invocation.pk)]
    assert [r["status"] for r in mine] == ["COMPLETED"], "the invocation completed once"
