"""The Django store on a file SQLite database in WAL mode, as the embedded default runs
it (the test project's settings on a file database, Celery eager), with several threads
starting and answering at once (issue 6: "the SQLite store tested with concurrent
connections on a file database in WAL mode"). Twice: with the options docs/embedding.md
recommends (IMMEDIATE transactions, a 20 s busy timeout), and with WAL alone (Django's
deferred transactions, whose write may find the database locked at once).

Nothing is lost, each answer is applied once, and no `database is locked` (or any other
error) reaches a caller.

The workload runs in a fresh process of its own (this module run with `python -m`), so it
gets its own file database configured exactly as users get it; the test checks what that
process reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
INVOCATIONS = 8  # started at once, one per thread
ITEMS = ["a", "bb"]  # questions per invocation, each answered by two racing threads
THREAD_TIMEOUT = 60.0
WAL = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
# The database OPTIONS users run with: docs/embedding.md's (the demo project's), and WAL
# alone with Django's default deferred transactions.
OPTIONS = {
    "immediate": {"init_command": WAL, "transaction_mode": "IMMEDIATE", "timeout": 20},
    "deferred": {"init_command": WAL},
}
DECISION = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["item", "score"],
}


def at_once(calls: list[Callable[[], Any]]) -> list[str]:
    """Run the calls in threads released together by a barrier; the error of each call
    that raised (type, message and traceback)."""
    from django.db import connection

    barrier = threading.Barrier(len(calls))
    errors: list[str] = []

    def target(call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            call()
        except BaseException:  # reported to the test
            errors.append(traceback.format_exc())
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    if any(thread.is_alive() for thread in threads):
        errors.append("a thread hung")
    return errors


class NoMigrations(dict):
    """MIGRATION_MODULES that says no app has migrations: `migrate --run-syncdb` then
    creates every table from its model."""

    def __contains__(self, app_label: object) -> bool:
        return True

    def __getitem__(self, app_label: str) -> None:
        return None


def workload(transactions: str) -> dict[str, Any]:
    """Start INVOCATIONS invocations at once, then answer each question from two threads
    at once; report the errors and what the database holds afterwards."""
    import django
    from django.conf import settings

    # The tables straight from the models (migrations are written at release time), as
    # pytest-django's --no-migrations builds them.
    settings.MIGRATION_MODULES = NoMigrations()
    settings.DATABASES["default"]["OPTIONS"] = OPTIONS[transactions]
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from workflows import services
    from workflows.engine import FunctionResponse, RequestInput, Workflow, node
    from workflows.models import Interrupt, Invocation, SessionEvent
    from workflows.registry import registry

    call_command("migrate", run_syncdb=True, verbosity=0)
    with connection.cursor() as cursor:
        journal_mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]

    @node(name="score", parallel_worker=True)
    def score(node_input):
        return RequestInput(message=f"Score {node_input}", response_schema=DECISION)

    registry.register(Workflow(name="sqlite_scores", edges=[("START", score)]))

    errors = at_once([partial(services.start, "sqlite_scores", ITEMS)] * INVOCATIONS)

    answers = []
    for question in Interrupt.objects.all():
        item = ITEMS[int(question.path.rsplit("@", 1)[1]) - 1]
        response = FunctionResponse(question.id, "score", {"item": item, "score": len(item)})
        answers += [response, response]  # the same answer from two threads at once
    errors += at_once([partial(services.submit_function_responses, [r]) for r in answers])

    return {
        "journal_mode": journal_mode,
        "errors": errors,
        "invocations": [
            {"status": i.status, "output": i.output, "lease_owner": i.lease_owner}
            for i in Invocation.objects.all()
        ],
        "questions": [
            {"status": q.status, "consumed": q.consumed, "response": q.response}
            for q in Interrupt.objects.all()
        ],
        "user_events": SessionEvent.objects.filter(author="user").count(),
    }


@pytest.mark.parametrize("transactions", sorted(OPTIONS))
def test_threads_starting_and_answering_on_a_wal_file_database(tmp_path, transactions):
    database = tmp_path / "hitl.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.project.settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_BROKER_URL": "",
    }
    finished = subprocess.run(
        [sys.executable, "-m", "tests.workflows.test_sqlite_concurrency", transactions],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout.splitlines()[-1])

    assert report["journal_mode"] == "wal"
    errors = report["errors"]
    assert not errors, f"{len(errors)} calls raised; the first:\n{errors[0] if errors else ''}"
    assert len(report["invocations"]) == INVOCATIONS, "every start was stored"
    expected_output = [{"item": item, "score": len(item)} for item in ITEMS]
    for invocation in report["invocations"]:
        assert invocation == {"status": "COMPLETED", "output": expected_output, "lease_owner": ""}
    assert len(report["questions"]) == INVOCATIONS * len(ITEMS)
    for question in report["questions"]:
        assert (question["status"], question["consumed"]) == ("resolved", True)
    assert report["user_events"] == INVOCATIONS * len(ITEMS), "each answer accepted once"


if __name__ == "__main__":
    print(json.dumps(workload(sys.argv[1])))
