"""The periodic jobs without Celery beat: every job of workflows.schedule (expire overdue
questions, apply due escalation steps, announce delegations that have started, re-enqueue
stalled work, purge old idempotency keys, write an audit checkpoint), each run here as a
worker runs what beat sends, whenever its period has passed. For the embedded default
(eager Celery, no beat); with a broker, run `celery beat` instead (running both is
harmless, only redundant)."""

import logging
import os
import socket
import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, close_old_connections

from workflows import dispatch
from workflows.conf import hitl_settings
from workflows.models import Heartbeat
from workflows.schedule import PERIODIC_JOBS, PeriodicJob
from workflows.worker import heartbeat

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run the periodic jobs ("
        + ", ".join(job.task.rsplit(".", 1)[-1] for job in PERIODIC_JOBS)
        + ") until stopped, a round every --interval seconds, each job in the first round "
        "and then whenever its period (workflows/schedule.py) has passed; --once runs every "
        "job once."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ran_at: dict[str, float] = {}  # when this process last ran each job, by task

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=30.0, help="seconds (default 30)")
        parser.add_argument("--once", action="store_true", help="run the jobs once and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        name = f"hitl_periodic@{socket.gethostname()} pid {os.getpid()}"
        if not options["once"]:
            self.stdout.write(f"{name}: running the periodic jobs every {options['interval']} s")
        try:
            while True:
                self.run_jobs(name)
                if options["once"]:
                    return
                time.sleep(options["interval"])
        except KeyboardInterrupt:
            self.stdout.write("stopped")

    def due(self, job: PeriodicJob) -> bool:
        last = self.ran_at.get(job.task)
        every = job.every.total_seconds()
        if job.every_setting:
            every = getattr(hitl_settings, job.every_setting)
        return last is None or time.monotonic() - last >= every

    def run_jobs(self, name: str) -> None:
        """One round: run each job that is due; print what they did when it was anything.
        A job that fails is logged and tried again next round; the others run."""
        close_old_connections()
        reports, did_something, database_failed = [], False, False
        for job in PERIODIC_JOBS:
            if not self.due(job):
                continue
            task = dispatch.registered_task(job.task)
            if task is None:
                raise CommandError(
                    f"no Celery task {job.task!r}: is the project's Celery app set up "
                    "(manage.py check, workflows.E001)?"
                )
            try:
                result = task()
            except (DatabaseError, ImproperlyConfigured, OSError) as exc:
                # A locked or unreachable database, a checkpoint that cannot be written
                # now: no reason to stop.
                logger.exception("periodic job %s failed; trying again next round", job.task)
                database_failed = database_failed or isinstance(exc, DatabaseError)
                continue
            self.ran_at[job.task] = time.monotonic()
            if result is not None:
                reports.append(job.report.format(result))
                did_something = did_something or bool(result)
        if not database_failed:
            heartbeat.record(Heartbeat.PERIODIC, name)
        if did_something:
            self.stdout.write(", ".join(reports))
