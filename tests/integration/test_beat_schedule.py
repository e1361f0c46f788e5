"""The periodic tasks of the project's CELERY_BEAT_SCHEDULE (issue 6: "the beat tasks run in
a test, the task names in the schedule are checked"). Each entry names a registered task
with a valid schedule, and running each one, as a worker runs what beat sends, does its
job. A new entry without a job check here fails the suite."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery.schedules import maybe_schedule
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone

from tests.factories import ApproverFactory
from tests.project.celery import app as celery_app
from workflows import dispatch, services
from workflows.audit.verify import check_checkpoint
from workflows.conf import hitl_settings
from workflows.engine import DefaultResponse, Escalation, RequestInput, Workflow, node
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Delegation, IdempotencyKey, Interrupt, Invocation
from workflows.registry import registry

from .worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULE = settings.CELERY_BEAT_SCHEDULE
DECISION = {"type": "object", "properties": {"approved": {"type": "boolean"}}}


@pytest.fixture(scope="module", autouse=True)
def task_modules() -> None:
    """Import the task modules the way a worker (and beat) does: autodiscovery."""
    celery_app.loader.import_default_modules()


def run_scheduled(entry_name: str) -> Any:
    """Run a schedule entry's task here, with the entry's arguments, as a worker runs what
    beat sends; its return value (its exception, if it raised)."""
    entry = SCHEDULE[entry_name]
    task = celery_app.tasks[entry["task"]]
    return task(*entry.get("args", ()), **entry.get("kwargs", {}))


@pytest.fixture
def asking() -> Iterator[Callable[..., str]]:
    """Register a one-question workflow (RequestInput keywords given); its name."""
    names: list[str] = []

    def register(**request: Any) -> str:
        @node(name="ask")
        def ask(node_input):
            return RequestInput(message="Approve?", response_schema=DECISION, **request)

        name = f"beat_{len(names)}"
        registry.register(Workflow(name=name, edges=[("START", ask)]))
        names.append(name)
        return name

    yield register
    for name in names:
        registry.unregister(name)


def recovers_stalled_work(entry_name: str, request: pytest.FixtureRequest) -> None:
    # The run task of a start is lost; recovery enqueues it again.
    workflow = request.getfixturevalue("asking")()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dispatch, "send_run", lambda invocation_id: None)
        invocation = services.start(workflow)
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.PENDING
    with override_settings(HITL={"STALLED_AFTER_SECONDS": 0}):
        assert run_scheduled(entry_name) == 1
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING


def expires_overdue_questions(entry_name: str, request: pytest.FixtureRequest) -> None:
    workflow = request.getfixturevalue("asking")(
        timeout=timedelta(milliseconds=10), on_timeout=DefaultResponse({"approved": False})
    )
    invocation = services.start(workflow)
    (question,) = Interrupt.objects.filter(invocation=invocation)
    wait_for(lambda: timezone.now() > question.deadline, what="the deadline to pass")
    assert run_scheduled(entry_name) == 1
    stored = Interrupt.objects.get(pk=question.pk)
    assert (stored.status, stored.response) == (InterruptStatus.EXPIRED, {"approved": False})
    row = Invocation.objects.get(pk=invocation.pk)
    assert (row.status, row.output) == (NodeStatus.COMPLETED, {"approved": False})


def applies_due_escalation_steps(entry_name: str, request: pytest.FixtureRequest) -> None:
    workflow = request.getfixturevalue("asking")(
        escalation=[Escalation(after=timedelta(milliseconds=10), remind=True)]
    )
    invocation = services.start(workflow)
    (question,) = Interrupt.objects.filter(invocation=invocation)
    wait_for(lambda: timezone.now() > question.next_escalation_at, what="the step to be due")
    assert run_scheduled(entry_name) == 1
    stored = Interrupt.objects.get(pk=question.pk)
    assert (stored.status, stored.escalation_step) == (InterruptStatus.PENDING, 1)


def announces_started_delegations(entry_name: str, request: pytest.FixtureRequest) -> None:
    ada, bob = (ApproverFactory(username=name) for name in ("ada", "bob"))
    now = timezone.now()
    later = services.delegate(
        ada, bob, now + timedelta(hours=1), now + timedelta(days=1), actor=ada
    )
    Delegation.objects.filter(pk=later.pk).update(starts_at=now - timedelta(minutes=1))
    assert run_scheduled(entry_name) == 1
    assert Delegation.objects.get(pk=later.pk).announced_at is not None


def purges_old_idempotency_keys(entry_name: str, request: pytest.FixtureRequest) -> None:
    user = get_user_model().objects.create_user("client")
    keys = {
        name: IdempotencyKey.objects.create(
            user=user, key=name, method="POST", path="/api/", request_hash="0", status_code=201
        )
        for name in ("old", "fresh")
    }
    too_old = timezone.now() - timedelta(seconds=hitl_settings.IDEMPOTENCY_KEY_TTL + 1)
    IdempotencyKey.objects.filter(pk=keys["old"].pk).update(created_at=too_old)
    assert run_scheduled(entry_name) == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]


def writes_an_audit_checkpoint(entry_name: str, request: pytest.FixtureRequest) -> None:
    assert run_scheduled(entry_name) is None  # no path configured: nothing written
    path = request.getfixturevalue("tmp_path") / "checkpoint.json"
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    services.start(request.getfixturevalue("asking")())
    with override_settings(HITL={"AUDIT_SIGNING_KEY": pem, "AUDIT_CHECKPOINT_PATH": str(path)}):
        assert run_scheduled(entry_name) == str(path)
    written = json.loads(path.read_text())
    check_checkpoint(written, key.public_key())
    assert [chain["length"] for chain in written["chains"]] == [1]


JOBS: dict[str, Callable[[str, pytest.FixtureRequest], None]] = {
    "workflows.tasks.recover_stalled": recovers_stalled_work,
    "workflows.tasks.expire_overdue_interrupts": expires_overdue_questions,
    "workflows.tasks.escalate_interrupts": applies_due_escalation_steps,
    "workflows.tasks.announce_delegations": announces_started_delegations,
    "workflows.tasks.purge_idempotency_keys": purges_old_idempotency_keys,
    "workflows.tasks.write_audit_checkpoint": writes_an_audit_checkpoint,
}


def test_the_schedule_runs_the_periodic_jobs():
    assert {entry["task"] for entry in SCHEDULE.values()} >= {
        "workflows.tasks.recover_stalled",
        "workflows.tasks.expire_overdue_interrupts",
        "workflows.tasks.escalate_interrupts",
    }, "recovery, expiry and escalation are periodic (DESIGN 3.6, 3.7, 4.3)"


@pytest.mark.parametrize("entry_name", sorted(SCHEDULE))
def test_each_scheduled_task_is_registered_and_does_its_job(entry_name, request):
    entry = SCHEDULE[entry_name]
    assert entry["task"] in celery_app.tasks, f"{entry_name}: no task named {entry['task']!r}"
    schedule = maybe_schedule(entry["schedule"], app=celery_app)
    assert schedule.remaining_estimate(timezone.now()) <= timedelta(days=1)
    assert entry["task"] in JOBS, f"{entry_name}: add a check of what {entry['task']} does"
    JOBS[entry["task"]](entry_name, request)
