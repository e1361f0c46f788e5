"""Failure, RetryConfig, runner.retry and cancellation of siblings (DESIGN 3.6)."""

import asyncio
from collections import Counter

import pytest

from workflows.engine import RequestInput, RetryConfig, Workflow, node
from workflows.engine.errors import InvocationStateError

from .helpers import (
    CANCELLED,
    COMPLETED,
    FAILED,
    PENDING,
    RUNNING,
    WAITING,
    Harness,
    statuses,
    sync,
)

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")


@sync
async def test_failed_resumed_node_retried_without_rerunning_upstream(store_backend):
    calls: Counter = Counter()
    flaky = {"fail": True}

    @node
    def fetch(node_input):
        calls["fetch"] += 1
        return {"invoice": node_input}

    @node(rerun_on_resume=True)
    def approve(ctx, node_input):
        calls["approve"] += 1
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id="approve-inv", payload=node_input)
        if flaky["fail"]:
            raise ConnectionError("ledger unavailable")
        return {**node_input, "approved_by": ctx.resume_inputs["approve-inv"]}

    @node
    def book(node_input):
        calls["book"] += 1
        return f"booked {node_input['invoice']} for {node_input['approved_by']}"

    h = Harness(Workflow(name="wf", edges=[("START", fetch, approve, book)]), store_backend)
    first = await h.run("INV-1")
    assert first.status == WAITING

    failed = await h.resume({"approve-inv": "alice"})
    assert failed.status == FAILED
    assert failed.error == "ConnectionError: ledger unavailable"
    assert failed.output is None
    assert statuses(failed) == {
        "wf@1": FAILED,
        "wf@1/fetch@1": COMPLETED,
        "wf@1/approve@1": FAILED,
    }
    approve_run = failed.node_runs["wf@1/approve@1"]
    assert (approve_run.run_id, approve_run.attempt) == (1, 1)
    # The node run keeps the traceback; the invocation and the event the one-line error.
    assert approve_run.error.startswith("Traceback (most recent call last):")
    assert approve_run.error.endswith("ConnectionError: ledger unavailable\n")
    errors = [(e.path, e.error) for e in failed.events if e.error]
    assert errors == [("wf@1/approve@1", "ConnectionError: ledger unavailable")]
    assert calls == Counter(fetch=1, approve=2)

    flaky["fail"] = False
    done = await h.retry(failed.invocation_id)
    assert done.status == COMPLETED
    assert done.error is None
    assert done.output == "booked INV-1 for alice"  # re-driven with the recorded answer
    assert calls == Counter(fetch=1, approve=3, book=1)  # upstream not re-run
    approve_run = done.node_runs["wf@1/approve@1"]
    assert (approve_run.run_id, approve_run.attempt) == (1, 2)  # retry() adds one
    assert statuses(done) == {
        "wf@1": COMPLETED,
        "wf@1/fetch@1": COMPLETED,
        "wf@1/approve@1": COMPLETED,
        "wf@1/book@1": COMPLETED,
    }


@sync
async def test_failed_downstream_of_an_answered_interrupt_is_retried_alone(store_backend):
    calls: Counter = Counter()
    flaky = {"fail": True}

    @node
    def ask(node_input):
        calls["ask"] += 1
        return RequestInput(interrupt_id="amount", response_schema={"type": "integer"})

    @node
    def charge(node_input):
        calls["charge"] += 1
        if flaky["fail"]:
            raise RuntimeError(f"card declined for {node_input}")
        return f"charged {node_input}"

    h = Harness(Workflow(name="wf", edges=[("START", ask, charge)]), store_backend)
    await h.run()
    failed = await h.resume({"amount": 42})
    assert failed.status == FAILED
    assert failed.error == "RuntimeError: card declined for 42"
    flaky["fail"] = False
    done = await h.retry(failed.invocation_id)
    assert done.output == "charged 42"
    assert calls == Counter(ask=1, charge=2)
    assert done.node_runs["wf@1/charge@1"].attempt == 2
    assert done.node_runs["wf@1/ask@1"].attempt == 1


@sync
async def test_retry_config_same_run_id_attempt_plus_one_error_event_per_attempt(store_backend):
    attempts = []

    @node(retry=RetryConfig(max_attempts=3, backoff=0.001))
    def flaky(ctx, node_input):
        attempts.append((ctx.run_id, ctx.attempt))
        if ctx.attempt < 3:
            raise TimeoutError(f"attempt {ctx.attempt}")
        return "ok"

    h = Harness(Workflow(name="wf", edges=[("START", flaky)]), store_backend)
    done = await h.run()
    assert done.status == COMPLETED
    assert done.output == "ok"
    assert attempts == [(1, 1), (1, 2), (1, 3)]
    run = done.node_runs["wf@1/flaky@1"]
    assert (run.run_id, run.attempt, run.status) == (1, 3, COMPLETED)
    errors = [(e.path, e.run_id, e.error) for e in done.events if e.error]
    assert errors == [
        ("wf@1/flaky@1", 1, "TimeoutError: attempt 1"),
        ("wf@1/flaky@1", 1, "TimeoutError: attempt 2"),
    ]


@sync
async def test_retry_config_exhausted_then_runner_retry_adds_one_attempt(store_backend):
    attempts = []
    fixed = {"now": False}

    @node(retry=RetryConfig(max_attempts=2, backoff=0.001))
    def flaky(ctx, node_input):
        attempts.append(ctx.attempt)
        if not fixed["now"]:
            raise ValueError(f"bad attempt {ctx.attempt}")
        return f"ok at {ctx.attempt}"

    h = Harness(Workflow(name="wf", edges=[("START", flaky)]), store_backend)
    failed = await h.run()
    assert failed.status == FAILED
    assert failed.error == "ValueError: bad attempt 2"
    assert attempts == [1, 2]
    assert failed.node_runs["wf@1/flaky@1"].attempt == 2
    assert [e.error for e in failed.events if e.error] == [
        "ValueError: bad attempt 1",
        "ValueError: bad attempt 2",
    ]
    fixed["now"] = True
    done = await h.retry(failed.invocation_id)
    assert attempts == [1, 2, 3]
    assert done.output == "ok at 3"
    assert done.node_runs["wf@1/flaky@1"].attempt == 3
    assert done.node_runs["wf@1/flaky@1"].run_id == 1


@sync
async def test_resume_keeps_the_attempt_number(store_backend):
    @node(rerun_on_resume=True, retry=RetryConfig(max_attempts=3, backoff=0.001))
    def ask(ctx, node_input):
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id="q")
        return [ctx.attempt, ctx.resume_inputs["q"]]

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    first = await h.run()
    assert first.node_runs["wf@1/ask@1"].attempt == 2
    done = await h.resume({"q": "a"})
    assert done.output == [2, "a"]
    assert done.node_runs["wf@1/ask@1"].attempt == 2


@sync
async def test_failure_cancels_in_flight_siblings(store_backend):
    started = asyncio.Event()
    finished = []

    @node
    async def slow(node_input):
        started.set()
        await asyncio.Event().wait()  # runs until the failure cancels it
        finished.append("slow")

    @node
    async def boom(node_input):
        await started.wait()
        raise RuntimeError("boom")

    @node
    def after_slow(node_input):
        finished.append("after_slow")

    h = Harness(
        Workflow(name="wf", edges=[("START", slow, after_slow), ("START", boom)]), store_backend
    )
    result = await asyncio.wait_for(h.run(), timeout=5)
    assert result.status == FAILED
    assert result.error == "RuntimeError: boom"
    assert finished == []
    assert statuses(result) == {
        "wf@1": FAILED,
        "wf@1/slow@1": CANCELLED,
        "wf@1/boom@1": FAILED,
    }
    assert [(e.path, e.error) for e in result.events if e.error] == [
        ("wf@1/boom@1", "RuntimeError: boom")
    ]


@pytest.mark.parametrize("delay_steps", range(8))
@sync
async def test_failure_leaves_no_sibling_pending_or_running(store_backend, delay_steps):
    """Whatever point the siblings reached (dispatched, started, mid-body), a failure
    leaves every triggered node run in a final state, and retry finishes the work."""
    calls: Counter = Counter()
    broken = {"yes": True}

    @node
    async def boom(node_input):
        for _ in range(delay_steps):
            await asyncio.sleep(0)
        if broken["yes"]:
            raise RuntimeError("boom")
        return None  # c is the workflow's one terminal output

    @node
    def a(node_input):
        calls["a"] += 1
        return 1

    @node
    def b(node_input):
        calls["b"] += 1
        return 2

    @node
    async def c(node_input):
        calls["c"] += 1
        await asyncio.sleep(0.05)
        return 3

    h = Harness(Workflow(name="wf", edges=[("START", boom), ("START", a, b, c)]), store_backend)
    failed = await h.run()
    assert failed.status == FAILED
    assert failed.error == "RuntimeError: boom"
    left = {p: s for p, s in statuses(failed).items() if s in (PENDING, RUNNING)}
    assert left == {}
    broken["yes"] = False
    done = await h.retry(failed.invocation_id)
    assert done.status == COMPLETED
    assert done.output == 3
    assert set(statuses(done).values()) == {COMPLETED}
    # At least once: a run the failure cancelled mid-body may run again, but one whose
    # completion was checkpointed before the failure never does.
    if failed.node_runs["wf@1/a@1"].status == COMPLETED:
        assert calls["a"] == 1
    assert all(calls[n] <= 2 for n in "abc")


@sync
async def test_retry_keeps_waiting_on_still_pending_interrupts(store_backend):
    """A rerun node waiting on two ids fails on the first answer; retry re-executes it
    with that answer and it still waits on the other (prior interrupt ids carried)."""
    flaky = {"fail": True}
    calls = []

    @node(rerun_on_resume=True)
    def collect(ctx, node_input):
        calls.append(sorted(ctx.resume_inputs))
        if not ctx.resume_inputs:
            yield RequestInput(interrupt_id="p")
            yield RequestInput(interrupt_id="q")
            return
        if flaky["fail"]:
            raise RuntimeError("flaky")
        if len(ctx.resume_inputs) == 2:
            yield dict(ctx.resume_inputs)

    h = Harness(Workflow(name="wf", edges=[("START", collect)]), store_backend)
    await h.run()
    failed = await h.resume({"p": 1})
    assert failed.status == FAILED
    assert set(failed.interrupts) == {"q"}  # still pending in the index
    flaky["fail"] = False
    waiting = await h.retry(failed.invocation_id)
    assert waiting.status == WAITING
    assert set(waiting.interrupts) == {"q"}
    assert waiting.node_runs["wf@1/collect@1"].interrupt_ids == {"q"}
    done = await h.resume({"q": 2})
    assert done.status == COMPLETED
    assert done.output == {"p": 1, "q": 2}
    assert calls == [[], ["p"], ["p"], ["p", "q"]]


@sync
async def test_retry_only_applies_to_failed_invocations(store_backend):
    @node
    def ask(node_input):
        return RequestInput(interrupt_id="r")

    h = Harness(Workflow(name="wf", edges=[("START", ask)]), store_backend)
    first = await h.run()
    with pytest.raises(InvocationStateError):
        await h.retry(first.invocation_id)


@sync
async def test_answer_accepted_while_failed_is_used_by_retry(store_backend):
    flaky = {"fail": True}

    @node(rerun_on_resume=True)
    def collect(ctx, node_input):
        if not ctx.resume_inputs:
            yield RequestInput(interrupt_id="p")
            yield RequestInput(interrupt_id="q")
            return
        if flaky["fail"]:
            raise RuntimeError("flaky")
        for interrupt_id in ("p", "q"):
            if interrupt_id not in ctx.resume_inputs:
                yield RequestInput(interrupt_id=interrupt_id)  # ask again for what is missing
        if len(ctx.resume_inputs) == 2:
            yield dict(ctx.resume_inputs)

    h = Harness(Workflow(name="wf", edges=[("START", collect)]), store_backend)
    await h.run()
    failed = await h.resume({"p": 1})
    assert failed.status == FAILED
    # The other question is still open; answering it is accepted but runs nothing.
    still_failed = await h.resume({"q": 2})
    assert still_failed.status == FAILED
    assert still_failed.interrupts == {}
    flaky["fail"] = False
    done = await h.retry(failed.invocation_id)
    assert done.status == COMPLETED
    assert done.output == {"p": 1, "q": 2}


@sync
async def test_parallel_worker_item_failure_cancels_the_other_items(store_backend):
    finished = []
    broken = {"yes": True}
    running: set[int] = set()
    others_running = asyncio.Event()
    release = asyncio.Event()  # set once the failure is in: a leaked item would go on

    @node(parallel_worker=True)
    async def item(node_input):
        if node_input == 0:
            await others_running.wait()  # the other items are in flight
            if broken["yes"]:
                raise RuntimeError("item 0 broke")
            return "zero"
        running.add(node_input)
        if running == {1, 2}:
            others_running.set()
        await release.wait()
        finished.append(node_input)
        return node_input

    h = Harness(Workflow(name="wf", edges=[("START", item)]), store_backend)
    failed = await h.run([0, 1, 2])
    assert failed.status == FAILED
    assert failed.error == "RuntimeError: item 0 broke"
    assert statuses(failed) == {
        "wf@1": FAILED,
        "wf@1/item@1": FAILED,
        "wf@1/item@1/item@1": FAILED,
        "wf@1/item@1/item@2": CANCELLED,
        "wf@1/item@1/item@3": CANCELLED,
    }
    release.set()
    for _ in range(10):
        await asyncio.sleep(0)  # any item still alive would now finish
    assert finished == []  # nothing kept running after the invocation failed
    assert (await h.result(failed.invocation_id)).node_runs == failed.node_runs

    broken["yes"] = False
    done = await h.retry(failed.invocation_id)
    assert done.output == ["zero", 1, 2]
    assert done.node_runs["wf@1/item@1/item@1"].attempt == 2
    assert done.node_runs["wf@1/item@1/item@2"].attempt == 1


async def recorded(ctx, path: str, status) -> None:
    """Wait until this execution has recorded `status` for the run at `path` (the
    engine's view of the run, which its next checkpoint writes)."""
    while getattr(ctx._execution.node_runs.get(path), "status", None) != status:
        await asyncio.sleep(0.001)


@sync
async def test_cancelled_nested_workflow_is_re_driven_by_retry(store_backend):
    broken = {"yes": True}
    calls: Counter = Counter()
    slow_running = asyncio.Event()
    release = asyncio.Event()  # slow is mid-body until the retry

    @node
    def ask(node_input):
        calls["ask"] += 1
        return RequestInput(interrupt_id="inner-q")

    @node
    async def slow(node_input):
        calls["slow"] += 1
        slow_running.set()
        await release.wait()

    @node
    async def boom(ctx, node_input):
        if broken["yes"]:
            # Fail once ask waits on its question and slow is mid-body.
            await slow_running.wait()
            await recorded(ctx, "wf@1/inner@1/ask@1", WAITING)
            raise RuntimeError("boom")

    inner = Workflow(name="inner", edges=[("START", ask), ("START", slow)])
    h = Harness(Workflow(name="wf", edges=[("START", inner), ("START", boom)]), store_backend)
    failed = await h.run()
    assert statuses(failed) == {
        "wf@1": FAILED,
        "wf@1/inner@1": CANCELLED,
        "wf@1/inner@1/ask@1": WAITING,
        "wf@1/inner@1/slow@1": CANCELLED,
        "wf@1/boom@1": FAILED,
    }
    assert failed.node_runs["wf@1/inner@1"].interrupt_ids == set()
    broken["yes"] = False
    release.set()
    waiting = await h.retry(failed.invocation_id)
    assert statuses(waiting) == {
        "wf@1": WAITING,
        "wf@1/inner@1": WAITING,
        "wf@1/inner@1/ask@1": WAITING,
        "wf@1/inner@1/slow@1": COMPLETED,
        "wf@1/boom@1": COMPLETED,
    }
    assert waiting.node_runs["wf@1"].interrupt_ids == {"inner-q"}
    assert calls == Counter(ask=1, slow=2)
    done = await h.resume({"inner-q": "answer"})
    assert done.status == COMPLETED
    assert calls == Counter(ask=1, slow=2)
