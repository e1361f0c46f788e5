"""Operator's view: questions waiting, stuck or failed work, worker and periodic-job
heartbeats. Exit status 1 when something needs attention (usable as a health check)."""

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.health import check_health, fresh
from workflows.models import Heartbeat


def ago(moment: datetime, now: datetime) -> str:
    seconds = int((now - moment).total_seconds())
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


class Command(BaseCommand):
    help = (
        "Questions waiting per workflow, the oldest one, overdue questions, stalled and failed "
        "invocations, and the worker and periodic-job heartbeats. Exits with status 1 when "
        "something needs attention."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--failed-hours",
            type=float,
            default=24.0,
            help="count FAILED invocations of the last N hours (default 24)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        health = check_health(failed_within=timedelta(hours=options["failed_hours"]))
        now, out = health.now, self.stdout.write
        total = sum(group.pending for group in health.questions)
        out(f"Pending questions: {total}")
        for group in health.questions:
            out(f"  {group.workflow_name}: {group.pending}, oldest asked {ago(group.oldest, now)}")
        if health.oldest_question is not None:
            question = health.oldest_question
            asked = ago(question.created_at, now)
            out(f"Oldest waiting: {question.id} ({question.path}), asked {asked}")
        out(f"Overdue questions not expired: {health.overdue}")
        out(f"Stalled invocations: {health.stalled}")
        out(f"Failed invocations since {health.failed_since:%Y-%m-%d %H:%M} UTC: {health.failed}")
        out(f"Tasks: {health.tasks.describe()}")
        self._heartbeats("Workers", health.workers, now, not_needed=health.tasks.eager)
        self._heartbeats("Periodic jobs", health.periodic, now, not_needed=False)
        if health.problems:
            for problem in health.problems:
                self.stderr.write(self.style.ERROR(f"attention: {problem}"))
            raise CommandError(f"{len(health.problems)} problem(s) need attention", returncode=1)
        out(self.style.SUCCESS("OK: nothing needs attention"))

    def _heartbeats(
        self, title: str, beats: list[Heartbeat], now: datetime, *, not_needed: bool
    ) -> None:
        if not_needed:
            self.stdout.write(f"{title}: none needed (Celery runs tasks eagerly, in-process)")
            return
        if not beats:
            self.stdout.write(f"{title}: never seen")
            return
        alive = fresh(beats, now)
        self.stdout.write(f"{title}: {len(alive)} alive")
        for beat in beats:
            state = "alive" if beat in alive else "silent"
            self.stdout.write(f"  {beat.name}: {state}, last seen {ago(beat.seen_at, now)}")
