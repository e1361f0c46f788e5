"""Celery tasks: thin wrappers over the write path (`services`) and the webhooks. Human
waits never sit in the broker: a task exists only while there is engine work to do. The
rest of the package enqueues them by name (`dispatch`) and never imports this module; the
Celery app's autodiscovery does."""

from celery import Task, shared_task

from . import dispatch, notifications, services, webhooks
from .audit import documents
from .conf import hitl_settings
from .log import log_context
from .models import IdempotencyKey


@shared_task(
    bind=True,
    name=dispatch.RUN_INVOCATION,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,
)
def run_invocation(self: Task, invocation_id: str) -> None:
    with log_context(invocation_id=invocation_id):
        retry_after = services.execute(invocation_id)
    # Another run holds the lease. If it is alive it picks up this work itself; if its
    # worker died, the lease expires and this delivery takes over then, instead of the
    # work waiting for recover_stalled. (In-process runs run inside that other run.)
    in_process = self.request.is_eager or self.request.called_directly
    if retry_after is not None and not in_process:
        raise self.retry(countdown=retry_after + 0.5)


@shared_task(name=dispatch.EXPIRE_OVERDUE_INTERRUPTS, ignore_result=True)
def expire_overdue_interrupts() -> int:
    return services.expire_overdue_interrupts()


@shared_task(name=dispatch.ESCALATE_INTERRUPTS, ignore_result=True)
def escalate_interrupts() -> int:
    return services.escalate_interrupts()


@shared_task(name=dispatch.ANNOUNCE_DELEGATIONS, ignore_result=True)
def announce_delegations() -> int:
    return services.announce_delegations()


@shared_task(name=dispatch.RECOVER_STALLED, ignore_result=True)
def recover_stalled() -> int:
    return services.recover_stalled()


@shared_task(name=dispatch.DELIVER_WEBHOOK, ignore_result=True)
def deliver_webhook(delivery_id: str) -> None:
    """One attempt at a webhook delivery; a failed one enqueues the next after a backoff."""
    webhooks.deliver(delivery_id)


@shared_task(name=dispatch.PURGE_IDEMPOTENCY_KEYS, ignore_result=True)
def purge_idempotency_keys() -> int:
    return IdempotencyKey.purge_expired()


@shared_task(name=dispatch.WRITE_AUDIT_CHECKPOINT, ignore_result=True)
def write_audit_checkpoint() -> str | None:
    """A signed checkpoint of the audit chains' heads, to HITL["AUDIT_CHECKPOINT_PATH"]."""
    return documents.write_checkpoint()


@shared_task(bind=True, name=dispatch.NOTIFY, ignore_result=True, max_retries=None)
def notify(
    self: Task,
    event: str,
    interrupt_ids: list[str],
    context: dict,
    retrying: list[list] | None = None,
) -> None:
    """Tell the notifiers about one event; the calls that failed are retried (only they)
    after a backoff, up to HITL["NOTIFY_MAX_ATTEMPTS"] calls each. In eager mode (no
    worker to come back later) the retries follow at once, in this process."""
    attempt = self.request.retries + 1
    failed = notifications.deliver(event, interrupt_ids, context, retrying, attempt=attempt)
    while failed and self.request.is_eager and attempt < hitl_settings.NOTIFY_MAX_ATTEMPTS:
        attempt += 1
        failed = notifications.deliver(event, interrupt_ids, context, failed, attempt=attempt)
    if failed and attempt < hitl_settings.NOTIFY_MAX_ATTEMPTS:
        raise self.retry(
            args=[event, interrupt_ids, context, failed],
            countdown=notifications.backoff(attempt),
        )
