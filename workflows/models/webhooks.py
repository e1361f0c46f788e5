"""The webhook tables: endpoints (where signed notifications go), deliveries (one message
to one endpoint) and their attempts. Importable from `workflows.models` as well."""

import base64
import secrets
import uuid

from django.conf import settings
from django.core.validators import URLValidator
from django.db import models

WEBHOOK_EVENTS = [
    ("interrupt.opened", "Interrupt opened"),
    ("interrupt.resolved", "Interrupt resolved"),
    ("decision.recorded", "Decision recorded"),
    ("invocation.finished", "Invocation finished"),
]


def new_webhook_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 24 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


# Deliveries are HTTP POSTs: URLField's default would also accept ftp:// and ftps://.
webhook_url_validator = URLValidator(schemes=["http", "https"])


class WebhookEndpoint(models.Model):
    """A URL that receives signed event notifications."""

    url = models.URLField(max_length=2000, validators=[webhook_url_validator])
    secret = models.CharField(
        max_length=200,
        default=new_webhook_secret,
        help_text="Standard Webhooks secret (whsec_ and base64); the receiver verifies with it.",
    )
    events = models.JSONField(
        default=list,
        blank=True,
        help_text="Event types to send, e.g. ['interrupt.opened']; empty: every event.",
    )
    is_active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # An A2A task's push notification config: the endpoint hears of this invocation only,
    # each message the task as its creator sees it, with the token they gave echoed back.
    invocation = models.ForeignKey(
        "workflows.Invocation",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Set: an A2A push notification config, for this invocation only.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    notification_token = models.CharField(
        max_length=500, blank=True, help_text="Sent back in the X-A2A-Notification-Token header."
    )

    class Meta:
        ordering = ["url"]

    def __str__(self) -> str:
        return self.description or self.url

    def wants(self, event_type: str) -> bool:
        return not self.events or event_type in self.events


class WebhookDelivery(models.Model):
    """One message to one endpoint. Its id is the `webhook-id` header, the same on every
    attempt, so a receiver can drop repeats."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_type = models.CharField(max_length=50, choices=WEBHOOK_EVENTS)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP request of a delivery: what the endpoint answered and how long it took."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    attempted_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.FloatField()
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery", "id"]

    def __str__(self) -> str:
        return f"{self.status_code or self.error[:40]}"
