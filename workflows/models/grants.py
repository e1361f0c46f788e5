"""Durable state of agent actions' grants (remembered approvals) and their uses.

The engine's store writes these rows (workflows.store); people list and revoke grants in
the admin and the API through workflows.services.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..engine.status import GrantScope


def new_grant_id() -> str:
    return str(uuid.uuid4())


def live_at(now: datetime) -> Q:
    """The rule "a grant is live" as a filter: not revoked, not expired at `now`, uses
    left. `Grant.is_live` is the same rule on one row."""
    return (
        Q(revoked_at__isnull=True)
        & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        & (Q(uses_left__isnull=True) | Q(uses_left__gt=0))
    )


class GrantQuerySet(models.QuerySet):
    def live(self, now: datetime | None = None) -> GrantQuerySet:
        return self.filter(live_at(now or timezone.now()))

    def ended(self, now: datetime | None = None) -> GrantQuerySet:
        """Revoked, expired or used up (the live ones' complement)."""
        return self.exclude(pk__in=self.live(now).values("pk"))


class Grant(models.Model):
    """An approval remembered for later dispatches of one gate (`workflow_name`,
    `node_name`) in its scope: they pass without asking while it is live (not revoked,
    not expired, uses left) and their args satisfy `pins`, a JSON Schema."""

    id = models.CharField(primary_key=True, max_length=64, default=new_grant_id, editable=False)
    workflow_name = models.CharField(max_length=200)
    node_name = models.CharField(max_length=200)
    scope = models.CharField(
        max_length=16, choices=[(s.value, s.value.title()) for s in GrantScope]
    )
    scope_id = models.CharField(
        max_length=255, blank=True, help_text="the invocation or the session; empty for always"
    )
    pins = models.JSONField(
        null=True, blank=True, help_text="a JSON Schema the args must satisfy; empty: any args"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    uses_left = models.PositiveIntegerField(null=True, blank=True, help_text="empty: unlimited")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # The gate's question whose answer made it (blank for a grant made directly).
    interrupt_id = models.CharField(max_length=255, blank=True)

    objects = GrantQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["workflow_name", "node_name", "scope", "scope_id"],
                name="hitl_grant_gate",
                condition=Q(revoked_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        where = f" {self.scope_id}" if self.scope_id else ""
        return f"{self.workflow_name}.{self.node_name} ({self.scope}{where})"

    def is_live(self, now: datetime | None = None) -> bool:
        """`live_at` on this row."""
        now = now or timezone.now()
        return (
            self.revoked_at is None
            and (self.expires_at is None or self.expires_at > now)
            and (self.uses_left is None or self.uses_left > 0)
        )


class GrantUse(models.Model):
    """A dispatch that passed its gate on a grant."""

    grant = models.ForeignKey(Grant, on_delete=models.CASCADE, related_name="uses")
    invocation = models.ForeignKey(
        "workflows.Invocation", on_delete=models.CASCADE, related_name="grant_uses"
    )
    path = models.CharField(max_length=1000)
    used_at = models.DateTimeField()

    class Meta:
        ordering = ["used_at", "id"]

    def __str__(self) -> str:
        return f"{self.grant_id} at {self.path}"
