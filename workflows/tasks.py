"""Celery tasks: thin wrappers over services. Human waits never sit in the broker: a task
exists only while there is engine work to do."""

from celery import Task, shared_task

from . import services, webhooks
from .audit import documents
from .models import IdempotencyKey


@shared_task(
    bind=True,
    name="workflows.tasks.run_invocation",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,
)
def run_invocation(self: Task, invocation_id: str) -> None:
    retry_after = services.execute(invocation_id)
    # Another run holds the lease. If it is alive it picks up this work itself; if its
    # worker died, the lease expires and this delivery takes over then, instead of the
    # work waiting for recover_stalled. (In-process tasks run inside that other run.)
    if retry_after is not None and not self.request.is_eager:
        raise self.retry(countdown=retry_after + 0.5)


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


@shared_task(name="workflows.tasks.write_audit_checkpoint", ignore_result=True)
def write_audit_checkpoint() -> str | None:
    """A signed checkpoint of the audit chains' heads, to HITL["AUDIT_CHECKPOINT_PATH"]."""
    return documents.write_checkpoint()
