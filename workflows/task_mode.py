"""Where the run tasks run: eagerly, in the process that enqueues them, or in Celery workers
through a broker. `hitl_status` says which and why; a `celery worker` that could receive
nothing (eager mode, or an in-memory broker that only its own process can reach) refuses
to start instead of coming up "ready" and idle. Connected in WorkflowsConfig.ready()."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kombu.utils.url import maybe_sanitize_url


@dataclass(frozen=True)
class TaskMode:
    eager: bool
    # Messages go through an in-memory transport: only the process that sent them can see
    # them, so no worker ever receives one.
    in_memory: bool
    broker: str  # the broker URL without its password; "" when none is set
    reason: str  # what in the configuration makes it so, in the settings' names

    @property
    def workers_can_receive(self) -> bool:
        return not self.eager and not self.in_memory

    def describe(self) -> str:
        if self.eager:
            return (
                f"eager ({self.reason}): runs happen in the process that starts or answers "
                "them; no workers needed"
            )
        if self.in_memory:
            return (
                f"broker {self.broker} ({self.reason}): messages stay in the process that "
                "sent them and no worker receives them"
            )
        return f"broker {self.broker}: runs happen in Celery workers"


def _broker_phrase(broker: str) -> str:
    if not broker:
        return "no CELERY_BROKER_URL set"
    if urlsplit(broker).scheme == "memory":
        return f"CELERY_BROKER_URL is {broker}, an in-memory transport"
    return f"CELERY_BROKER_URL is {broker}"


def task_mode(app: Any = None) -> TaskMode:
    """How Celery's current app (or `app`) runs tasks, read from its configuration."""
    if app is None:
        from celery import current_app

        app = current_app
    conf = app.conf
    broker = maybe_sanitize_url(conf.broker_url or "")  # the environment's URL wins, as in Celery
    eager = bool(conf.task_always_eager)
    in_memory = urlsplit(broker).scheme == "memory"
    reasons = ["CELERY_TASK_ALWAYS_EAGER is True"] if eager else []
    if eager or in_memory:
        reasons.append(_broker_phrase(broker))
    return TaskMode(eager=eager, in_memory=in_memory, broker=broker, reason="; ".join(reasons))


def refuse_receiving_nothing(sender: Any = None, **kwargs: Any) -> None:
    """Celery's worker_init: stop a worker that could never receive a task. SystemExit,
    because Celery logs and ignores the Exceptions a signal receiver raises."""
    mode = task_mode(sender.app)
    if not mode.workers_can_receive:
        raise SystemExit(
            f"This Celery worker would receive no tasks: {mode.reason}. "
            "Set CELERY_BROKER_URL to a real broker (redis://... or amqp://...) with "
            "CELERY_TASK_ALWAYS_EAGER False, for the web processes and the workers alike; "
            "or run no worker at all: in eager mode the web process runs every task."
        )


def connect() -> None:
    from celery import signals

    signals.worker_init.connect(refuse_receiving_nothing, dispatch_uid="hitl-task-mode")
