"""Database connections in a Celery worker: kept between tasks, checked before each one.

Celery's Django integration closes every database connection before and after each task
unless CELERY_DB_REUSE_MAX is set, so a worker opens a new PostgreSQL connection for every
`run_invocation` (2.8x fewer completed invocations per second with two workers, see
docs/performance.md). In a `celery worker` process this module instead does what Django
does around a web request: before and after each task it closes the connections that are
unusable (after an error) or older than their maximum age, and it checks a kept connection
with a ping before the task's first query (Django's CONN_HEALTH_CHECKS), so a database
restart costs a reconnect, not a failed task.

A database left at Django's default CONN_MAX_AGE of 0 gets HITL["WORKER_CONN_MAX_AGE"]
seconds in the worker; HITL["WORKER_CONN_MAX_AGE"] = 0 gives Celery's behaviour back, and
so does setting CELERY_DB_REUSE_MAX (Celery's own reuse then applies as configured). Web
processes are left alone: the signal that sets this up fires only in a worker. Connected in
WorkflowsConfig.ready()."""

from __future__ import annotations

import math
from typing import Any

from django.db import close_old_connections, connections

from ..conf import hitl_settings


def _celery_django_fixups(app: Any) -> list[Any]:
    """The Django fixups Celery installed on `app` (one when DJANGO_SETTINGS_MODULE is set)."""
    from celery.fixups.django import DjangoFixup

    return [fixup for fixup in getattr(app, "_fixups", ()) if isinstance(fixup, DjangoFixup)]


def _keep_connections(max_age: float) -> None:
    """In this process, connections of databases at CONN_MAX_AGE 0 live `max_age` seconds;
    every kept connection is pinged before its first query after a task boundary."""
    for alias in connections:
        database = connections.settings[alias]
        if database["CONN_MAX_AGE"] == 0:
            database["CONN_MAX_AGE"] = max_age
        database["CONN_HEALTH_CHECKS"] = True


def _worker_task(sender: Any) -> bool:
    """A task a worker runs (an eager one runs inside its caller's request or transaction)."""
    return not getattr(sender.request, "is_eager", False)


def before_task(sender: Any = None, **kwargs: Any) -> None:
    """task_prerun: Django's start-of-request cleanup, then the ping of each kept
    connection (the engine's store reads through psycopg's own cursor, which Django's
    lazy health check never sees)."""
    if not _worker_task(sender):
        return
    close_old_connections()
    for connection in connections.all(initialized_only=True):
        connection.close_if_health_check_failed()


def after_task(sender: Any = None, **kwargs: Any) -> None:
    """task_postrun: Django's end-of-request cleanup (a connection an error left unusable,
    or past its age, is closed)."""
    if _worker_task(sender):
        close_old_connections()


def reuse_connections(sender: Any = None, **kwargs: Any) -> None:
    """worker_init: turn Celery's close-per-task into Django's age and health rules."""
    max_age = hitl_settings.WORKER_CONN_MAX_AGE
    if not max_age:
        return
    fixups = _celery_django_fixups(sender.app)
    if any(fixup.worker_fixup.db_reuse_max for fixup in fixups):
        return  # CELERY_DB_REUSE_MAX is set: the project chose Celery's own reuse
    for fixup in fixups:
        # Celery closes every connection at each task boundary unless this is set; the
        # closing is left to close_unusable_or_old, by age and health.
        fixup.worker_fixup.db_reuse_max = math.inf
    _keep_connections(max_age)
    from celery import signals

    signals.task_prerun.connect(before_task, dispatch_uid="hitl-connections-before")
    signals.task_postrun.connect(after_task, dispatch_uid="hitl-connections-after")


def connect() -> None:
    from celery import signals

    signals.worker_init.connect(reuse_connections, dispatch_uid="hitl-worker-connections")
