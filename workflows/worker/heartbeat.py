"""Heartbeats of the processes an operator cannot see from the database otherwise: Celery
workers (Celery's own worker heartbeat, task completions) and the periodic jobs (beat's
tasks, or `manage.py hitl_periodic`). Connected in WorkflowsConfig.ready()."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from ..conf import hitl_settings
from ..models import Heartbeat
from ..schedule import periodic_tasks

logger = logging.getLogger(__name__)

PERIODIC_TASKS = periodic_tasks()

# Last write per (kind, name) in this process: a worker's heartbeat fires every 2 s, the row
# needs updating far less often.
_last_recorded: dict[tuple[str, str], float] = {}


def record(kind: str, name: str, *, throttle: bool = False) -> None:
    """Store that `name` (of `kind`) is alive now. Never raises: a heartbeat must not break
    the worker or the job that sends it."""
    key = (kind, name)
    now = time.monotonic()
    if throttle and now - _last_recorded.get(key, float("-inf")) < (
        hitl_settings.HEARTBEAT_STALE_SECONDS / 4
    ):
        return
    # A failed attempt counts too: a database that is down is tried again a quarter period
    # later, not at every task.
    _last_recorded[key] = now
    try:
        Heartbeat.objects.update_or_create(
            kind=kind, name=name, defaults={"seen_at": timezone.now()}
        )
    except DatabaseError:
        logger.warning("could not record the %s heartbeat of %s", kind, name, exc_info=True)


def on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    record(Heartbeat.WORKER, sender.hostname)


def on_heartbeat_sent(sender: Any = None, **kwargs: Any) -> None:
    record(Heartbeat.WORKER, sender.eventer.hostname, throttle=True)


def on_task_postrun(sender: Any = None, **kwargs: Any) -> None:
    request = sender.request
    if request.is_eager:
        return  # ran in the caller's process: no worker involved
    if sender.name in PERIODIC_TASKS:
        record(Heartbeat.PERIODIC, "celery beat")
    record(Heartbeat.WORKER, request.hostname, throttle=True)


def connect() -> None:
    from celery import signals

    signals.worker_ready.connect(on_worker_ready, dispatch_uid="hitl-heartbeat-ready")
    signals.heartbeat_sent.connect(on_heartbeat_sent, dispatch_uid="hitl-heartbeat-sent")
    signals.task_postrun.connect(on_task_postrun, dispatch_uid="hitl-heartbeat-task")
