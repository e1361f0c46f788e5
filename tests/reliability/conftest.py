"""Fixtures of the reliability tests: PostgreSQL, a real broker (Redis in CI) and real
`celery worker` processes running the test workflows of tests/reliability/workflows.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from celery.schedules import maybe_schedule
from django.conf import settings

from tests.integration.worker import WorkerProcess, celery_broker, celery_worker, require_postgres
from tests.project.celery import app as celery_app

from . import workflows  # noqa: F401  # registers the test workflows in this process

__all__ = ["celery_broker"]

WORKER_SETTINGS = "tests.reliability.settings"


@pytest.fixture
def postgres(transactional_db: None) -> None:
    """Committed rows on PostgreSQL: worker processes read them from the test database."""
    require_postgres("worker processes must see the test database")


@pytest.fixture
def journal(tmp_path: Path) -> str:
    """The file the test workflows' node bodies append their executions to."""
    return str(tmp_path / "journal.jsonl")


@pytest.fixture
def start_worker(celery_broker: str) -> Iterator[Callable[[], WorkerProcess]]:
    """Start a worker process running the test workflows; all stop at the test's end."""
    with ExitStack() as stack:

        def start() -> WorkerProcess:
            return stack.enter_context(celery_worker(celery_broker, settings=WORKER_SETTINGS))

        yield start


class Beat:
    """Runs the periodic tasks of CELERY_BEAT_SCHEDULE in this process, each when its
    schedule says it is due, as a beat process started at construction would; call
    `tick()` often. `runs` lists the task names in the order they ran."""

    def __init__(self) -> None:
        celery_app.loader.import_default_modules()  # the task modules, as a worker does
        started = celery_app.now()
        self.tasks = [celery_app.tasks[e["task"]] for e in settings.CELERY_BEAT_SCHEDULE.values()]
        self.schedules = [
            maybe_schedule(e["schedule"], app=celery_app)
            for e in settings.CELERY_BEAT_SCHEDULE.values()
        ]
        self.last_runs = [started] * len(self.tasks)
        self.runs: list[str] = []

    def tick(self) -> None:
        for index, (task, schedule) in enumerate(zip(self.tasks, self.schedules, strict=True)):
            if schedule.is_due(self.last_runs[index]).is_due:
                self.last_runs[index] = celery_app.now()
                self.runs.append(task.name)
                task()


@pytest.fixture
def beat() -> Beat:
    return Beat()
