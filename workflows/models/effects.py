"""Durable state of the side effects of node runs (`ctx.effect`)."""

from django.db import models

from ..engine.status import EffectStatus


class Effect(models.Model):
    """A side effect of a node run (`ctx.effect`): started before its function is called,
    finished with its result, failed, or in doubt (started and never finished)."""

    invocation = models.ForeignKey(
        "workflows.Invocation", on_delete=models.CASCADE, related_name="effects", db_index=False
    )
    path = models.CharField(max_length=1000)
    name = models.CharField(max_length=200)
    key = models.TextField(help_text="the idempotency key the function is given")
    status = models.CharField(
        max_length=16, choices=[(s.value, s.value.replace("_", " ")) for s in EffectStatus]
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["invocation", "id"]
        constraints = [
            models.UniqueConstraint(fields=["invocation", "path", "name"], name="hitl_effect_once")
        ]

    def __str__(self) -> str:
        return f"{self.name} at {self.path} ({self.status})"
