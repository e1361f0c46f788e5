"""The `requestState` of an `input_required` round (DESIGN 4.5).

The `mcp` package's RequestStateBoundary seals what a round hands out and checks what comes
back: expiry, the request it was minted for (method, tool, a digest of the arguments) and
the principal (the API token's user). It seals with `SignedStateCodec`: an HMAC-SHA256 from
SECRET_KEY by Django's signing (so SECRET_KEY_FALLBACKS rotate it like every other signed
value of the project). Inside, the state names the user, the invocation, the questions it
asks and a nonce; the nonce is taken in the answer's transaction (McpRequestState), so a
state answers once on every process."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone
from mcp.server.request_state import InvalidRequestState, RequestStateBoundary, RequestStateSecurity

from ...models import McpRequestState
from .errors import refusal

SALT = "workflows.protocols.mcp.request_state"
TTL_SECONDS = 15 * 60
AUDIENCE = "hitl-workflows"


class SignedStateCodec:
    """RequestStateCodec: Django's signing (HMAC-SHA256 keyed from SECRET_KEY)."""

    def seal(self, payload: bytes) -> str:
        return signing.dumps(payload.decode(), salt=SALT, compress=True)

    def unseal(self, token: str) -> bytes:
        try:
            return str(signing.loads(token, salt=SALT)).encode()
        except signing.BadSignature:
            raise InvalidRequestState("seal") from None


def boundary() -> RequestStateBoundary:
    security = RequestStateSecurity(codec=SignedStateCodec(), ttl=TTL_SECONDS)
    return RequestStateBoundary(security, default_audience=AUDIENCE)


@dataclass(frozen=True)
class Round:
    """What one requestState asked: whose, which invocation, which questions."""

    user_id: str
    invocation_id: str
    question_ids: tuple[str, ...]
    nonce: str


def mint(user: Any, invocation_id: str, question_ids: list[str]) -> str:
    return json.dumps(
        {"u": str(user.pk), "i": invocation_id, "q": question_ids, "n": secrets.token_urlsafe(24)}
    )


def read(plaintext: str, user: Any) -> Round:
    """The round a verified state names; another user's state is refused (the boundary
    already binds the principal: this holds should a token's user change)."""
    try:
        claims = json.loads(plaintext)
        found = Round(str(claims["u"]), str(claims["i"]), tuple(claims["q"]), str(claims["n"]))
    except (ValueError, KeyError, TypeError):
        raise invalid_state() from None
    if found.user_id != str(user.pk):
        raise invalid_state()
    return found


def invalid_state() -> Exception:
    return refusal("invalid_request_state", "Invalid or expired requestState")


def take(found: Round) -> None:
    """Mark the state used, in the caller's transaction; a second use is refused."""
    now = timezone.now()
    McpRequestState.objects.filter(expires_at__lt=now).delete()
    try:
        with transaction.atomic():
            McpRequestState.objects.create(
                nonce=found.nonce, expires_at=now + timedelta(seconds=TTL_SECONDS)
            )
    except IntegrityError:
        raise refusal("request_state_used", "This requestState was used already") from None
