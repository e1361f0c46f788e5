"""`Idempotency-Key` on POST: a repeat gets the stored response instead of a second effect.

The key is claimed (a unique row per user and key) in the same transaction as the work it
guards, so two concurrent requests with one key cannot both do the work: the second waits
for the first to commit, then replays its response. Only successful responses are kept: a
rejected request changes nothing, its key included, and may be retried as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from ..conf import hitl_settings
from ..engine.errors import ValueEncodingError
from ..engine.values import check_text
from ..models import IdempotencyKey
from .exceptions import IdempotencyKeyReused

HEADER = "Idempotency-Key"
REPLAY_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255


def request_fingerprint(request: Request) -> str:
    """What makes two requests "the same": method, path and the parsed JSON body."""
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def start_key(request: Request) -> str | None:
    """The key services.start dedupes by (beyond this module's TTL), scoped to the caller:
    two users may use the same Idempotency-Key."""
    key = request.headers.get(HEADER, "").strip()
    if not key:
        return None
    return f"api:{request.user.pk}:{hashlib.sha256(key.encode()).hexdigest()}"


def expired_before() -> Any:
    return timezone.now() - timedelta(seconds=hitl_settings.IDEMPOTENCY_KEY_TTL)


def _replay(record: IdempotencyKey) -> Response:
    return Response(record.response, status=record.status_code, headers={REPLAY_HEADER: "true"})


def idempotent(action: Callable[..., Response]) -> Callable[..., Response]:
    """Decorate a POST view method so it honours the `Idempotency-Key` header."""

    @wraps(action)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER, "").strip()
        if not key:
            return action(view, request, *args, **kwargs)
        try:
            check_text(key, HEADER, MAX_KEY_LENGTH)
        except ValueEncodingError as exc:
            raise ValidationError({HEADER: exc.reason}) from None
        fingerprint = request_fingerprint(request)
        user: Any = request.user  # signed in: the views ask for it before this runs
        method = str(request.method)
        with transaction.atomic():
            try:
                with transaction.atomic():
                    record = IdempotencyKey.objects.create(
                        user=user,
                        key=key,
                        method=method,
                        path=request.path[:1000],
                        request_hash=fingerprint,
                        status_code=0,
                    )
            except IntegrityError:
                record = IdempotencyKey.objects.select_for_update().get(user=user, key=key)
                if record.created_at >= expired_before():
                    if record.request_hash != fingerprint:
                        raise IdempotencyKeyReused() from None
                    return _replay(record)
                # An expired key starts afresh.
                record.request_hash, record.created_at = fingerprint, timezone.now()
                record.method, record.path = method, request.path[:1000]
            response = action(view, request, *args, **kwargs)
            if not response.status_code < 300:
                transaction.set_rollback(True)
                return response
            record.status_code, record.response = response.status_code, response.data
            record.save()
        return response

    return wrapper
