"""Durable state of the people layer (DESIGN 4.3): delegations while someone is away.
Written only through workflows.services; the rules that read them live in workflows.policy."""

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
