"""The periodic jobs without Celery beat: expire overdue questions, apply due escalation
steps, announce delegations that have started and re-enqueue stalled work every few
seconds, and write an audit checkpoint every AUDIT_CHECKPOINT_SECONDS when
AUDIT_CHECKPOINT_PATH is set. For the embedded default (eager Celery, no beat); with a
broker, run `celery beat` instead (running both is harmless, only redundant)."""

import logging
import os
import socket
import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, close_old_connections

from workflows import heartbeat, services
from workflows.audit import documents
from workflows.conf import hitl_settings
from workflows.models import Heartbeat

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run the periodic jobs (services.expire_overdue_interrupts, services."
        "escalate_interrupts, services.announce_delegations and services.recover_stalled) "
        "every --interval seconds until stopped; --once runs them once."
    )

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

    checkpoint_at: float | None = None  # when this process last wrote an audit checkpoint

    def run_jobs(self, name: str) -> None:
        close_old_connections()
        self.write_checkpoint()
        try:
            expired = services.expire_overdue_interrupts()
            escalated = services.escalate_interrupts()
            announced = services.announce_delegations()
            recovered = services.recover_stalled()
        except DatabaseError:
            # A locked or unreachable database now is no reason to stop: try next round.
            logger.exception("periodic jobs failed; trying again next round")
            return
        heartbeat.record(Heartbeat.PERIODIC, name)
        if expired or escalated or announced or recovered:
            self.stdout.write(
                f"expired {expired} question(s), applied {escalated} escalation step(s), "
                f"announced {announced} delegation(s), re-enqueued {recovered} run(s)"
            )

    def write_checkpoint(self) -> None:
        due = self.checkpoint_at is None or (
            time.monotonic() - self.checkpoint_at >= hitl_settings.AUDIT_CHECKPOINT_SECONDS
        )
        if not due or not hitl_settings.AUDIT_CHECKPOINT_PATH:
            return
        try:
            path = documents.write_checkpoint()
        except (ImproperlyConfigured, OSError, DatabaseError):
            logger.exception("audit checkpoint not written; trying again next round")
            return
        self.checkpoint_at = time.monotonic()
        self.stdout.write(f"audit checkpoint written to {path}")
