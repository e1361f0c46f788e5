"""A real `celery worker` keeps its database connection between tasks by default (Celery's
Django integration alone opens one per task), survives the loss of that connection, and
gives Celery's behaviour back with HITL["WORKER_CONN_MAX_AGE"] = 0; web processes keep
theirs as configured. The worker's database is at Django's default CONN_MAX_AGE of 0."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from django.db import connection, connections

from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Invocation

from . import connection_workflows  # noqa: F401  # registers report_backend in this process
from .worker import WorkerProcess, celery_worker, require_postgres, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

WORKER_SETTINGS = "tests.integration.connection_settings"
RUNS = 4


@pytest.fixture
def postgres(transactional_db: None) -> None:
    require_postgres("a worker process must see the test database")


@pytest.fixture
def start_worker(
    celery_broker: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., WorkerProcess]]:
    with ExitStack() as stack:

        def start(worker_conn_max_age: float | None = None) -> WorkerProcess:
            if worker_conn_max_age is not None:
                monkeypatch.setenv("HITL_TEST_WORKER_CONN_MAX_AGE", str(worker_conn_max_age))
            return stack.enter_context(celery_worker(celery_broker, settings=WORKER_SETTINGS))

        yield start


def backend_pid_of_a_run() -> int:
    """Start report_backend, wait until the worker completed it; the server process that
    served the worker's connection."""
    invocation = services.start("report_backend", {})

    def completed() -> Invocation | None:
        row = Invocation.objects.get(pk=invocation.pk)
        assert row.status != NodeStatus.FAILED, row.error
        return row if row.status == NodeStatus.COMPLETED else None

    return wait_for(completed, timeout=15, what="report_backend to complete").output["pid"]


def test_a_worker_keeps_its_connection_between_tasks(postgres, start_worker):
    start_worker()
    pids = {backend_pid_of_a_run() for _ in range(RUNS)}
    assert len(pids) == 1, f"{len(pids)} connections for {RUNS} tasks"


def test_celerys_connection_per_task_is_back_with_a_max_age_of_zero(postgres, start_worker):
    start_worker(worker_conn_max_age=0)
    pids = {backend_pid_of_a_run() for _ in range(RUNS)}
    assert len(pids) == RUNS


def test_a_kept_connection_that_died_is_replaced_before_the_next_task(postgres, start_worker):
    start_worker()
    first = backend_pid_of_a_run()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first])
        assert cursor.fetchone()[0] is True
    # The health check finds the connection dead and opens another: the task succeeds.
    second = backend_pid_of_a_run()
    assert second != first
    assert backend_pid_of_a_run() == second


def test_a_web_process_keeps_its_database_settings():
    # Only a worker's start (worker_init) changes them; this process is not a worker.
    # tests/project/settings.py sets CONN_MAX_AGE 60 on PostgreSQL and leaves Django's 0
    # on SQLite, and no health checks.
    database = connections.settings["default"]
    assert database["CONN_MAX_AGE"] == (60 if connection.vendor == "postgresql" else 0)
    assert database["CONN_HEALTH_CHECKS"] is False
