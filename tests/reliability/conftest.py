"""Fixtures of the reliability tests: PostgreSQL, a real broker (Redis in CI) and real
`celery worker` processes running the test workflows of tests/reliability/workflows.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.integration.worker import WorkerProcess, celery_broker, celery_worker, require_postgres

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
