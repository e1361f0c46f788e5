"""Every attempt to notify someone of a question, kept whether it worked or not."""

from django.db import models

NOTIFY_EVENTS = ("opened", "reminded", "escalated", "delegated", "decided", "superseded")


class NotificationAttempt(models.Model):
    """One call of one notifier for one event of a question: kept whether it worked or
    not, so an operator sees what was sent, what failed and why."""

    interrupt = models.ForeignKey(
        "workflows.Interrupt", on_delete=models.CASCADE, related_name="notification_attempts"
    )
    event = models.CharField(max_length=16, choices=[(e, e) for e in NOTIFY_EVENTS])
    notifier = models.CharField(max_length=255)
    attempt = models.PositiveSmallIntegerField(default=1)
    succeeded = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["interrupt", "event"], name="hitl_notification_event")]

    def __str__(self) -> str:
        outcome = "sent" if self.succeeded else "failed"
        return f"{self.event} of {self.interrupt_id} by {self.notifier}: {outcome}"
