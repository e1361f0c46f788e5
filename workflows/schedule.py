"""The periodic jobs: one list, plain data (no Django or Celery import, so that settings
modules may read it). What reads it:

- a project's beat schedule: `CELERY_BEAT_SCHEDULE = {**beat_schedule(), ...}` (the demo's
  settings, docs/embedding.md);
- `manage.py hitl_periodic`, which runs the same tasks without beat;
- the heartbeat (`workflows.worker.heartbeat`), which counts these tasks as the periodic jobs;
- the system check workflows.W003, which warns when a CELERY_BEAT_SCHEDULE misses one;
- the docs: docs/embedding.md and docs/deployment.md list them, and a test holds both
  lists to this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class PeriodicJob:
    entry: str  # its name in CELERY_BEAT_SCHEDULE
    task: str  # the Celery task that does it
    every: timedelta
    does: str  # what it does, for the docs and the check's message
    report: str  # what `hitl_periodic` prints of the task's result ({}) when it has one
    every_setting: str = ""  # a HITL setting that, when given, is `every` for hitl_periodic


PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob(
        "hitl-expire-interrupts",
        "workflows.tasks.expire_overdue_interrupts",
        timedelta(seconds=30),
        "expires each pending question past its deadline, exactly once, and applies its "
        "timeout policy (answer with the `DefaultResponse`, or fail the waiting node)",
        "expired {} question(s)",
    ),
    PeriodicJob(
        "hitl-escalate-interrupts",
        "workflows.tasks.escalate_interrupts",
        timedelta(seconds=30),
        "applies the due steps of escalation ladders, each exactly once and in order",
        "applied {} escalation step(s)",
    ),
    PeriodicJob(
        "hitl-announce-delegations",
        "workflows.tasks.announce_delegations",
        timedelta(seconds=30),
        "tells the delegate of each delegation made to start later that it has started, once",
        "announced {} delegation(s)",
    ),
    PeriodicJob(
        "hitl-recover-stalled",
        "workflows.tasks.recover_stalled",
        timedelta(seconds=3),
        "re-enqueues open invocations nobody is running (a worker died, or the broker was "
        "down when an answer came); recovery takes `LEASE_SECONDS` plus this period",
        "re-enqueued {} run(s)",
    ),
    PeriodicJob(
        "hitl-purge-idempotency-keys",
        "workflows.tasks.purge_idempotency_keys",
        timedelta(hours=1),
        "deletes the API's `Idempotency-Key` records older than `IDEMPOTENCY_KEY_TTL` (else "
        "that table grows forever)",
        "purged {} idempotency key(s)",
    ),
    PeriodicJob(
        "hitl-audit-checkpoint",
        "workflows.tasks.write_audit_checkpoint",
        timedelta(hours=1),
        "writes a signed checkpoint of the audit chains to `AUDIT_CHECKPOINT_PATH` (nothing "
        "when unset)",
        "audit checkpoint written to {}",
        every_setting="AUDIT_CHECKPOINT_SECONDS",
    ),
)


def beat_schedule() -> dict[str, dict[str, Any]]:
    """CELERY_BEAT_SCHEDULE entries that run every periodic job at its period."""
    return {job.entry: {"task": job.task, "schedule": job.every} for job in PERIODIC_JOBS}


def periodic_tasks() -> frozenset[str]:
    """The names of the periodic jobs' Celery tasks."""
    return frozenset(job.task for job in PERIODIC_JOBS)
