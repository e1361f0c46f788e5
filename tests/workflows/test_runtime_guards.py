"""The durable runtime's guards, each with the failure it prevents (issue: exactly once,
for real). Through services and the Django store, on the test database (SQLite, or
PostgreSQL when DATABASE_URL points at it)."""

import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from workflows import dispatch, services, signals
from workflows.engine import FunctionResponse, JoinNode, RequestInput, Workflow, node
from workflows.engine.errors import (
    InputValidationError,
    InvocationFinishedError,
    LeaseLostError,
    ResponseValidationError,
)
from workflows.engine.state import NodeRunState, WriteBatch
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, Session
from workflows.registry import registry
from workflows.services import sweeps
from workflows.store import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)


def asking(name: str, interrupt_id: str, **request) -> Workflow:
    @node
    def ask():
        return RequestInput(interrupt_id=interrupt_id, **request)

    return Workflow(name=name, edges=[("START", ask)])


def test_an_answer_accepted_while_a_run_holds_the_lease_is_applied_by_that_run(register_workflow):
    """Mutation killed: the store's "answers waiting" check always false (the running
    worker would leave the answer for recovery)."""

    @node
    def first():
        return RequestInput(interrupt_id="guard-first")

    @node
    def answers_the_other(node_input):
        # Runs inside the worker's pass: the answer's own run finds the lease held.
        services.submit_function_responses([FunctionResponse("guard-other", "", "late")])
        return node_input

    @node
    def other():
        return RequestInput(interrupt_id="guard-other")

    join = JoinNode()
    register_workflow(
        Workflow(
            name="guard_mid_run",
            edges=[("START", first, answers_the_other, join), ("START", other, join)],
        )
    )
    invocation = services.start("guard_mid_run")
    services.submit_function_responses([FunctionResponse("guard-first", "", "go")])
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED, invocation.error
    assert invocation.output == {"answers_the_other": "go", "other": "late"}


def test_a_write_under_a_lease_another_run_holds_is_refused(register_workflow):
    """Mutation killed: removing the lease-owner condition from the step write."""
    register_workflow(asking("guard_lease", "guard-lease-q"))
    invocation = services.start("guard_lease")
    store = DjangoStore()
    invocation_id = str(invocation.pk)
    assert store.acquire_lease_sync(invocation_id, "worker-a", 60) is not None
    step = WriteBatch(
        invocation_id,
        lease_owner="worker-b",
        node_runs={"x@1": NodeRunState(status=NodeStatus.RUNNING, run_id=1, name="x")},
    )
    with pytest.raises(LeaseLostError):
        store.commit_sync(step)
    assert not invocation.node_runs.filter(path="x@1").exists()
    # An expired lease is taken over; the old owner's next write is refused.
    Invocation.objects.filter(pk=invocation.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert store.acquire_lease_sync(invocation_id, "worker-b", 60) is not None
    with pytest.raises(LeaseLostError):
        store.commit_sync(WriteBatch(invocation_id, lease_owner="worker-a"))


def test_no_run_writes_over_a_final_status(register_workflow):
    """Defect: the deadline sweep failed an invocation and the running worker then wrote
    WAITING over FAILED."""
    register_workflow(asking("guard_final", "guard-final-q"))
    invocation = services.start("guard_final")
    store = DjangoStore()
    invocation_id = str(invocation.pk)
    checkpoint = store.acquire_lease_sync(invocation_id, "worker-a", 60)
    Invocation.objects.filter(pk=invocation.pk).update(status=NodeStatus.FAILED)
    waiting = checkpoint.invocation
    waiting.status = NodeStatus.WAITING
    with pytest.raises(InvocationFinishedError):
        store.commit_sync(WriteBatch(invocation_id, invocation=waiting, lease_owner="worker-a"))
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.FAILED


def test_the_deadline_sweep_defers_to_a_live_lease(register_workflow):
    """Defect: expiry failed an invocation while a worker was running it."""
    register_workflow(asking("guard_sweep", "guard-sweep-q", timeout=timedelta(seconds=1)))
    invocation = services.start("guard_sweep")
    store = DjangoStore()
    assert store.acquire_lease_sync(str(invocation.pk), "busy-worker", 60) is not None
    later = timezone.now() + timedelta(minutes=1)
    assert services.expire_overdue_interrupts(now=later) == 0
    assert Interrupt.objects.get(pk="guard-sweep-q").status == InterruptStatus.PENDING
    store.release_lease_sync(str(invocation.pk), "busy-worker")
    assert services.expire_overdue_interrupts(now=later) == 1
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.FAILED
    assert "expired" in invocation.error


def test_one_failing_expiry_does_not_abandon_the_others(register_workflow, monkeypatch):
    for n in range(3):
        register_workflow(
            asking(f"guard_many_{n}", f"guard-many-{n}", timeout=timedelta(seconds=1))
        )
        services.start(f"guard_many_{n}")
    real = sweeps.expire_batch

    def flaky(checkpoint, interrupt_id, now):
        if interrupt_id == "guard-many-1":
            raise RuntimeError("one bad row")
        return real(checkpoint, interrupt_id, now)

    monkeypatch.setattr(sweeps, "expire_batch", flaky)
    assert services.expire_overdue_interrupts(now=timezone.now() + timedelta(minutes=1)) == 2
    statuses = dict(Interrupt.objects.values_list("id", "status"))
    assert statuses["guard-many-0"] == statuses["guard-many-2"] == InterruptStatus.EXPIRED
    assert statuses["guard-many-1"] == InterruptStatus.PENDING


def test_a_failing_signal_receiver_cannot_break_an_accepted_answer(register_workflow):
    """Defect: a receiver that raised made the answer look failed and skipped the resume."""
    register_workflow(asking("guard_signal", "guard-signal-q"))
    invocation = services.start("guard_signal")

    def broken_receiver(**kwargs):
        raise RuntimeError("receiver bug")

    signals.interrupt_resolved.connect(broken_receiver)
    try:
        services.submit_function_responses([FunctionResponse("guard-signal-q", "", "yes")])
    finally:
        signals.interrupt_resolved.disconnect(broken_receiver)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == "yes"


def test_signals_wait_for_the_outermost_commit(register_workflow):
    """Mutation killed: sending signals before commit."""
    register_workflow(asking("guard_commit", "guard-commit-q"))
    services.start("guard_commit")
    received: list[str] = []

    def receiver(interrupt_id, **kwargs):
        received.append(interrupt_id)

    signals.interrupt_resolved.connect(receiver)
    try:
        with transaction.atomic():
            services.submit_function_responses([FunctionResponse("guard-commit-q", "", 1)])
            assert received == [], "sent before the transaction committed"
        assert received == ["guard-commit-q"]
    finally:
        signals.interrupt_resolved.disconnect(receiver)


@pytest.mark.parametrize("value", [float("nan"), float("-inf"), "\ud800", "nul \x00"])
def test_bad_answers_and_inputs_are_named_errors_that_change_nothing(register_workflow, value):
    register_workflow(asking("guard_bad", "guard-bad-q"))
    services.start("guard_bad")
    before = (Interrupt.objects.get(pk="guard-bad-q").status, Invocation.objects.count())
    with pytest.raises(ResponseValidationError):
        services.submit_function_responses([FunctionResponse("guard-bad-q", "", value)])
    with pytest.raises(InputValidationError):
        services.start("guard_bad", {"value": value})
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(InputValidationError, match="nested more than 64 levels deep"):
        services.start("guard_bad", deep)
    assert (Interrupt.objects.get(pk="guard-bad-q").status, Invocation.objects.count()) == before


def test_start_with_an_idempotency_key_returns_the_first_invocation(register_workflow):
    register_workflow(asking("guard_key", "guard-key-q"))
    first = services.start("guard_key", {"n": 1}, idempotency_key="client-42")
    again = services.start("guard_key", {"n": 1}, idempotency_key="client-42")
    assert again.pk == first.pk
    assert Invocation.objects.filter(workflow_name="guard_key").count() == 1
    from workflows.engine.errors import IdempotencyKeyReusedError

    with pytest.raises(IdempotencyKeyReusedError):
        services.start("guard_key", {"n": 2}, idempotency_key="client-42")


def test_recovery_enqueues_each_stalled_invocation_once_until_a_run_takes_it(register_workflow):
    register_workflow(asking("guard_flood", "guard-flood-q"))
    invocation = services.start("guard_flood")
    Invocation.objects.filter(pk=invocation.pk).update(status=NodeStatus.RUNNING)
    sent: list[str] = []
    later = timezone.now() + timedelta(minutes=5)
    with override_settings(CELERY_TASK_ALWAYS_EAGER=False):
        original = dispatch.send_run
        dispatch.send_run = sent.append
        try:
            assert services.recover_stalled(now=later) == 1
            assert services.recover_stalled(now=later) == 0  # not again while queued
        finally:
            dispatch.send_run = original
    assert sent == [invocation.pk]
    DjangoStore().acquire_lease_sync(str(invocation.pk), "a-run", 60)  # a run took it
    DjangoStore().release_lease_sync(str(invocation.pk), "a-run")
    Invocation.objects.filter(pk=invocation.pk).update(status=NodeStatus.RUNNING)
    assert services.recover_stalled(now=later) == 1


@override_settings(USE_TZ=False)
def test_an_interrupt_with_a_deadline_works_without_use_tz(register_workflow):
    """Defect: on SQLite with USE_TZ=False any interrupt with a timeout wedged the run."""
    register_workflow(asking("guard_naive", "guard-naive-q", timeout=timedelta(minutes=5)))
    invocation = services.start("guard_naive")
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.WAITING, invocation.error
    record = DjangoStore().load_interrupts_sync(["guard-naive-q"])["guard-naive-q"]
    assert record.deadline is not None and record.deadline.tzinfo is not None


def test_datetimes_read_through_the_store_are_aware(register_workflow):
    register_workflow(asking("guard_aware", "guard-aware-q"))
    services.start("guard_aware")
    services.submit_function_responses([FunctionResponse("guard-aware-q", "", "ok")])
    record = DjangoStore().load_interrupts_sync(["guard-aware-q"])["guard-aware-q"]
    assert record.resolved_at.tzinfo is not None


def test_a_parallel_worker_wider_than_one_statement_completes(register_workflow):
    """Defect: 4,500 items exceeded PostgreSQL's bind-parameter limit (SQLite's near
    2,200): the transition is now split into several statements."""

    @node(parallel_worker=True)
    def double(node_input):
        return node_input * 2

    register_workflow(Workflow(name="guard_wide", edges=[("START", double)]))
    invocation = services.start("guard_wide", list(range(4_500)))
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED, invocation.error
    assert invocation.output[-1] == 8_998


def test_the_heartbeat_keeps_a_slow_synchronous_body_leased(register_workflow):
    """Defect: a node slower than LEASE_SECONDS ran in two workers at once. The body
    holds the caller's thread; the heartbeat renews from its own connection. Mutation
    killed: no heartbeat (another delivery takes the expired lease over)."""

    started = threading.Event()
    finish = threading.Event()

    @node
    def slow():
        started.set()
        assert finish.wait(10)
        return "done"

    register_workflow(Workflow(name="guard_slow", edges=[("START", slow)]))
    invocation = Invocation.objects.create(
        session=Session.objects.create(),
        workflow_name="guard_slow",
        workflow_version=registry.get("guard_slow").version,
    )

    def work() -> None:
        try:
            services.execute(invocation.pk)
        finally:
            connection.close()

    with override_settings(HITL={"LEASE_SECONDS": 0.6}):
        worker = threading.Thread(target=work)
        worker.start()
        assert started.wait(10)
        taken: list = []
        for _ in range(4):  # two lease lengths: without the heartbeat it would expire
            finish.wait(0.3)
            taken.append(services.execute(invocation.pk))
        finish.set()
        worker.join(20)
    assert all(retry_after is not None for retry_after in taken), taken
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED, invocation.error
    assert invocation.unfinished_deliveries == 0


def test_the_engine_runner_on_the_django_store_refuses_bad_answers(register_workflow):
    """The engine Runner on the Django store also refuses bad answers before writing."""
    from workflows.engine import Runner

    workflow = register_workflow(asking("guard_runner", "guard-runner-q"))
    runner = Runner(workflow, store=DjangoStore())
    result = async_to_sync(runner.run)()
    assert result.status == NodeStatus.WAITING
    with pytest.raises(ResponseValidationError):
        async_to_sync(runner.resume)([FunctionResponse("guard-runner-q", "", float("nan"))])
