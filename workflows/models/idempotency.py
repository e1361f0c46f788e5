"""The API's idempotency keys."""

from datetime import timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from ..conf import hitl_settings


class IdempotencyKey(models.Model):
    """A POST the API answered successfully, kept so a repeat with the same
    `Idempotency-Key` gets the same response instead of doing the work twice."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=1000)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="hitl_idempotency_key")]
        indexes = [models.Index(fields=["created_at"], name="hitl_idempotency_created")]

    def __str__(self) -> str:
        return self.key

    @classmethod
    def purge_expired(cls) -> int:
        """Delete the keys older than HITL["IDEMPOTENCY_KEY_TTL"]; returns how many."""
        cutoff = timezone.now() - timedelta(seconds=hitl_settings.IDEMPOTENCY_KEY_TTL)
        deleted, _ = cls.objects.filter(created_at__lt=cutoff).delete()
        return deleted
