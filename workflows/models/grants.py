"""Durable state of agent actions' grants (remembered approvals) and their uses.

The engine's store writes these rows (workflows.store); people list and revoke grants in
the admin and the API through workflows.services.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..engine.status import GrantScope


def new_grant_id() -> str:
    return str(uuid.uuid4())


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

    def is_live(self, now=None) -> bool:
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
