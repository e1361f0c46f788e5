"""Celery tasks: thin wrappers over services. Human waits never sit in the broker: a task
exists only while there is engine work to do."""

from celery import shared_task

from . import services, webhooks
from .models import IdempotencyKey


@shared_task(
    name="workflows.tasks.run_invocation",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_invocation(invocation_id: str) -> None:
    services.execute(invocation_id)


@shared_task(name="workflows.tasks.expire_overdue_interrupts", ignore_result=True)
def expire_overdue_interrupts() -> int:
    return services.expire_overdue_interrupts()


@shared_task(name="workflows.tasks.recover_stalled", ignore_result=True)
def recover_stalled() -> int:
    return services.recover_stalled()


@shared_task(name="workflows.tasks.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: str) -> None:
    """One attempt at a webhook delivery; a failed one enqueues the next after a backoff."""
    webhooks.deliver(delivery_id)


@shared_task(name="workflows.tasks.purge_idempotency_keys", ignore_result=True)
def purge_idempotency_keys() -> int:
    return IdempotencyKey.purge_expired()
