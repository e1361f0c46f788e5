"""Run as `python -m tests.reliability.dying_answer INTERRUPT_ID WHERE` (DATABASE_URL the
test database): approve the question in this process, in eager mode as the embedded
default runs, and die by SIGKILL at WHERE: "before-commit" (the answer's writes, its
audit entry and its run's lease sent in their transaction, the COMMIT not) or
"after-commit" (committed, its run not started). Leases last 1 s here."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import django


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")
    django.setup()
    from django.conf import settings

    from tests.reliability import workflows  # noqa: F401  # registers the test workflows
    from workflows import dispatch, services
    from workflows.conf import hitl_settings
    from workflows.store import DjangoStore

    settings.HITL = {**getattr(settings, "HITL", {}), "LEASE_SECONDS": 1}
    hitl_settings.reload()
    interrupt_id, where = sys.argv[1:]
    if where == "before-commit":
        write = DjangoStore.commit_with_sync

        def write_then_die(store: DjangoStore, batch: Any, also: Any) -> None:
            write(store, batch, also)
            die()

        DjangoStore.commit_with_sync = write_then_die  # type: ignore[method-assign]
    else:
        dispatch.send_run = lambda invocation_id: die()
    answer = {"id": interrupt_id, "name": "approve", "response": {"approved": True}}
    services.submit_function_responses([answer])


if __name__ == "__main__":
    main()
