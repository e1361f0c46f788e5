"""Durable state of the people layer (DESIGN 4.3): delegations while someone is away, and
every attempt to notify someone. Written only through workflows.services / the notifier
task; the rules that read delegations live in workflows.policy."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Delegation(models.Model):
    """While active (`starts_at` <= now < `ends_at`, not ended), `delegate` may do what
    `delegator` may for questions assigned to the delegator (directly or by group), in
    the `workflows` named (all when empty)."""

    delegator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="delegations_given"
    )
    delegate = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="delegations_received"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    workflows = models.JSONField(default=list, blank=True, help_text="empty: every workflow")
    ended_at = models.DateTimeField(null=True, blank=True)
    # When its delegate was told it started: at creation when it starts at once, else by
    # the periodic sweep (`announce_delegations`) once `starts_at` has passed.
    announced_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-starts_at"]
        indexes = [
            models.Index(
                fields=["delegate", "ends_at"],
                name="hitl_delegation_open",
                condition=Q(ended_at__isnull=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="hitl_delegation_window"
            ),
            models.CheckConstraint(
                condition=~Q(delegator=models.F("delegate")), name="hitl_delegation_not_self"
            ),
        ]

    def __str__(self) -> str:
        window = f"{self.starts_at:%Y-%m-%d} - {self.ends_at:%Y-%m-%d}"
        return f"{self.delegator} -> {self.delegate} ({window})"


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
