"""When each process last showed it is alive."""

from django.db import models


class Heartbeat(models.Model):
    """When a process last showed it is alive: a Celery worker, or the periodic jobs
    (beat's tasks or `manage.py hitl_periodic`). `manage.py hitl_status` reads these."""

    WORKER = "worker"
    PERIODIC = "periodic"
    KIND_CHOICES = [(WORKER, "Celery worker"), (PERIODIC, "Periodic jobs")]

    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    name = models.CharField(max_length=255, help_text="worker host name, or what ran the jobs")
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="hitl_heartbeat_kind_name")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


# Agent actions (approval gates' grants, effects) have a module of their own.
