"""What an operator sees of a real `celery -A tests.project worker`: its log lines name the
invocation they belong to, and its heartbeat makes hitl_status healthy (issue 9)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Heartbeat, Invocation

from .worker import celery_worker, require_postgres, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.broker]


@pytest.fixture
def postgres(transactional_db):
    require_postgres("a worker process must see the test database")


@pytest.mark.usefixtures("postgres")
def test_worker_logs_name_the_invocation_and_its_heartbeat_keeps_status_healthy(celery_broker):
    with celery_worker(celery_broker) as worker:
        wait_for(
            lambda: Heartbeat.objects.filter(kind=Heartbeat.WORKER, name=worker.name).exists(),
            what="the worker's heartbeat",
        )
        invocation = services.start("test_expense", {"employee": "Ada", "amount": 250})
        wait_for(
            lambda: Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING,
            what="the invocation to wait",
        )
        Heartbeat.objects.create(kind=Heartbeat.PERIODIC, name="test", seen_at=timezone.now())
        out = StringIO()
        call_command("hitl_status", stdout=out)  # raises CommandError when not healthy
        assert f"{worker.name}: alive" in out.getvalue()
        wait_for(lambda: "succeeded" in worker.log(), what="the task's log line")
    succeeded = [line for line in worker.log().splitlines() if "succeeded in" in line]
    assert succeeded, worker.log()
    assert f"[{invocation.pk} -] Task workflows.tasks.run_invocation[" in succeeded[0]
