"""Celery tasks: thin wrappers over services. Human waits never sit in the broker: a task
exists only while there is engine work to do."""

from celery import shared_task

from . import services


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
