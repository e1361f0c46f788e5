"""What an operator needs to know at a glance, read from the database: questions waiting,
work that is stuck or failed, and whether workers and the periodic jobs are alive.
`manage.py hitl_status` prints it; its exit status says whether anything needs attention."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Min
from django.utils import timezone

from .conf import hitl_settings
from .engine.status import InterruptStatus, NodeStatus
from .models import Heartbeat, Interrupt, Invocation
from .task_mode import TaskMode, task_mode


@dataclass
class WorkflowQuestions:
    workflow_name: str
    pending: int
    oldest: datetime


@dataclass
class Health:
    now: datetime
    tasks: TaskMode
    questions: list[WorkflowQuestions]
    oldest_question: Interrupt | None
    overdue: int
    stalled: int
    failed: int
    failed_since: datetime
    workers: list[Heartbeat]
    periodic: list[Heartbeat]
    problems: list[str] = field(default_factory=list)


def fresh(beats: list[Heartbeat], now: datetime) -> list[Heartbeat]:
    limit = now - timedelta(seconds=hitl_settings.HEARTBEAT_STALE_SECONDS)
    return [beat for beat in beats if beat.seen_at >= limit]


def check_health(*, failed_within: timedelta = timedelta(hours=24)) -> Health:
    now = timezone.now()
    grace = timedelta(seconds=hitl_settings.HEARTBEAT_STALE_SECONDS)
    stalled_after = timedelta(seconds=hitl_settings.STALLED_AFTER_SECONDS)
    pending = Interrupt.objects.filter(status=InterruptStatus.PENDING)
    questions = [
        WorkflowQuestions(row["workflow_name"], row["pending"], row["oldest"])
        for row in pending.values("workflow_name")
        .annotate(pending=Count("id"), oldest=Min("created_at"))
        .order_by("workflow_name")
    ]
    health = Health(
        now=now,
        tasks=task_mode(),
        questions=questions,
        oldest_question=pending.order_by("created_at").first(),
        overdue=pending.filter(deadline__lt=now - grace).count(),
        # Recovery re-enqueues work idle for STALLED_AFTER_SECONDS; still idle after one
        # more heartbeat period, recovery is not working.
        stalled=Invocation.objects.stalled(now, stalled_after + grace).distinct().count(),
        failed=Invocation.objects.filter(
            status=NodeStatus.FAILED, updated_at__gte=now - failed_within
        ).count(),
        failed_since=now - failed_within,
        workers=list(Heartbeat.objects.filter(kind=Heartbeat.WORKER).order_by("-seen_at")),
        periodic=list(Heartbeat.objects.filter(kind=Heartbeat.PERIODIC).order_by("-seen_at")),
    )
    if health.overdue:
        health.problems.append(
            f"{health.overdue} question(s) past their deadline for over {grace} and "
            "not expired: the periodic jobs are not running"
        )
    if health.stalled:
        health.problems.append(
            f"{health.stalled} invocation(s) stalled for over {stalled_after + grace}: work "
            "waiting that no run picks up (is recovery running? see the worker's log)"
        )
    if health.failed:
        health.problems.append(f"{health.failed} invocation(s) FAILED since {health.failed_since}")
    if health.tasks.in_memory and not health.tasks.eager:
        health.problems.append(
            f"tasks are sent to the in-memory broker {health.tasks.broker}, which no worker "
            "can read: set CELERY_BROKER_URL to a real broker, or run eagerly"
        )
    elif not health.tasks.eager and not fresh(health.workers, now):
        health.problems.append("no Celery worker heartbeat: is a worker running?")
    if not fresh(health.periodic, now):
        health.problems.append(
            "the periodic jobs (expiry, recovery) did not run lately: start celery beat, or "
            "`manage.py hitl_periodic` on the embedded default"
        )
    return health
