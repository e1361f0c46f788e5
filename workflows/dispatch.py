"""Celery work, enqueued by registered task name the way django-celery-beat runs its
tasks: nothing outside `workflows/tasks.py` imports it (the Celery app's autodiscovery
does), so the services, the worker and the webhooks stay free of an import circle."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)

# The names workflows/tasks.py registers its tasks under.
RUN_INVOCATION = "workflows.tasks.run_invocation"
EXPIRE_OVERDUE_INTERRUPTS = "workflows.tasks.expire_overdue_interrupts"
ESCALATE_INTERRUPTS = "workflows.tasks.escalate_interrupts"
ANNOUNCE_DELEGATIONS = "workflows.tasks.announce_delegations"
RECOVER_STALLED = "workflows.tasks.recover_stalled"
DELIVER_WEBHOOK = "workflows.tasks.deliver_webhook"
PURGE_IDEMPOTENCY_KEYS = "workflows.tasks.purge_idempotency_keys"
WRITE_AUDIT_CHECKPOINT = "workflows.tasks.write_audit_checkpoint"
NOTIFY = "workflows.tasks.notify"

# Publishing is bounded in time (with the broker timeouts of docs/embedding.md): what the
# transaction stored is safe, and recover_stalled enqueues it later when publishing fails.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}


# Celery's autodiscovery returns at once, having imported nothing, to a second thread that
# asks while a first one runs it: the second waits here instead.
_discovery = threading.Lock()


def registered_task(name: str) -> Any:
    """The task registered as `name` with the current Celery app, or None. The first look
    imports the app's task modules (its autodiscovery), as a worker does when it starts."""
    app = current_app
    if name not in app.tasks:
        with _discovery:
            if name not in app.tasks:
                app.loader.import_default_modules()
    return app.tasks.get(name)


def send(name: str, args: list[Any], **options: Any) -> None:
    """Publish task `name` with `args` (in eager mode: run it now, in this process).

    Through the registered task when there is one, so its options and eager mode apply
    as with `Task.apply_async`; else by name, for a worker that has it (eager mode then
    raises NotRegistered: it needs the task itself)."""
    task = registered_task(name)
    if task is None and not current_app.conf.task_always_eager:
        current_app.send_task(name, args=args, **options)
    else:
        current_app.tasks[name].apply_async(args=args, **options)


def runs_in_process() -> bool:
    """Whether a run enqueued now executes in this process, in this thread, once the
    transaction commits (Celery's eager mode, the embedded default)."""
    return bool(current_app.conf.task_always_eager)


def send_run(invocation_id: Any) -> None:
    """Publish a run of the invocation now (in eager mode: run it now, in this process); a
    failure to publish is logged, not raised."""
    if runs_in_process():
        try:
            # The task called as a function: Celery's eager apply (its tracer, request and
            # result; 0.14 ms a run, bench/README.md) adds nothing to a run whose one
            # argument is the invocation id as a string.
            registered_task(RUN_INVOCATION)(str(invocation_id))
        except Exception:  # the caller's request succeeded all the same
            logger.warning(
                "run of invocation %s raised; its next delivery or recover_stalled runs it again",
                invocation_id,
                exc_info=True,
            )
        return
    try:
        send(RUN_INVOCATION, [str(invocation_id)], retry=True, retry_policy=PUBLISH_RETRY_POLICY)
    except Exception:  # the broker is down or hung: the caller's request succeeded
        logger.warning(
            "run of invocation %s not started; recover_stalled will start it",
            invocation_id,
            exc_info=True,
        )


def enqueue_run(invocation_id: Any) -> None:
    """Publish a run of the invocation once the current transaction commits."""
    # robust: a failing on-commit callback of someone else's never skips this one.
    transaction.on_commit(lambda: send_run(invocation_id), robust=True)
