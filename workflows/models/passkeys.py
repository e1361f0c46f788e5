"""Passkeys: the credentials people registered to sign decisions with, and the server's
nonces of passkey signatures: each signing challenge carries one, kept here until the
decision it signs uses it (once) or it expires, so an assertion is fresh."""

import secrets

from django.conf import settings
from django.db import models


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


class PasskeyChallenge(models.Model):
    """A nonce handed to `user` to sign a decision on `interrupt_id` with; deleted when a
    decision uses it. Written only by workflows.services.passkeys."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    interrupt_id = models.CharField(max_length=255)
    nonce = models.CharField(max_length=64, unique=True, default=new_nonce, editable=False)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "interrupt_id"], name="hitl_passkey_nonce")]

    def __str__(self) -> str:
        return f"{self.user} on {self.interrupt_id}"


PASSKEY_NAME_LENGTH = 100


class PasskeyCredential(models.Model):
    """A passkey or security key a person registered (WebAuthn) to sign decisions with.
    Written only by workflows.services.passkeys; `rp_id` and `origin` are where it was registered,
    what its assertions are checked against unless HITL["WEBAUTHN_RP_ID"] /
    HITL["WEBAUTHN_ORIGIN"] say otherwise."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="passkeys"
    )
    credential_id = models.CharField(max_length=1400, unique=True, help_text="base64url")
    public_key = models.BinaryField(help_text="COSE_Key, as the authenticator gave it")
    sign_count = models.PositiveBigIntegerField(default=0)
    transports = models.JSONField(default=list, blank=True)
    rp_id = models.CharField(max_length=253)
    origin = models.CharField(max_length=300)
    name = models.CharField(max_length=PASSKEY_NAME_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "created_at", "id"]

    def __str__(self) -> str:
        return self.name
