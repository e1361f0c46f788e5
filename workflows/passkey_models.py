"""The server's nonces of passkey signatures: each signing challenge carries one, kept
here until the decision it signs uses it (once) or it expires, so an assertion is fresh."""

import secrets

from django.conf import settings
from django.db import models


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


class PasskeyChallenge(models.Model):
    """A nonce handed to `user` to sign a decision on `interrupt_id` with; deleted when a
    decision uses it. Written only by workflows.passkeys."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    interrupt_id = models.CharField(max_length=255)
    nonce = models.CharField(max_length=64, unique=True, default=new_nonce, editable=False)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "interrupt_id"], name="hitl_passkey_nonce")]

    def __str__(self) -> str:
        return f"{self.user} on {self.interrupt_id}"
