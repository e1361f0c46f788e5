"""Webhooks: signed notifications of what happened, to the endpoints configured in admin.

Events: `interrupt.opened`, `interrupt.resolved`, `decision.recorded` and
`invocation.finished`. Each is JSON `{"type", "timestamp", "data"}`, signed in the Standard
Webhooks format (headers webhook-id, webhook-timestamp, webhook-signature) by the
`standardwebhooks` package, so receivers verify it with any Standard Webhooks library.

The receivers run after the commit that caused the event (the signals fire then). They
store one WebhookDelivery per subscribed endpoint and enqueue `deliver_webhook` for it; a
failure there is logged and never reaches the write path that sent the signal. The task
POSTs, records every attempt (status code, duration, error) and, on failure, enqueues the
next attempt with exponential backoff until HITL["WEBHOOK_MAX_ATTEMPTS"]. The webhook-id is
the delivery's id, the same on every attempt, so a receiver drops repeats by it.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial, wraps
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import F
from django.db.models.signals import post_delete, post_save
from django.forms.models import model_to_dict
from django.utils import timezone
from standardwebhooks import Webhook

from . import dispatch, signals
from .conf import hitl_settings
from .models import (
    Decision,
    Interrupt,
    Invocation,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    new_webhook_secret,
    webhook_url_validator,
)

logger = logging.getLogger(__name__)

INTERRUPT_FIELDS = [
    "id",
    "invocation",
    "workflow_name",
    "path",
    "message",
    "payload",
    "response_schema",
    "assignees",
    "status",
    "deadline",
    "response",
    "resolved_by",
    "resolved_at",
]
INVOCATION_FIELDS = ["id", "workflow_name", "workflow_version", "status", "output", "error"]
DECISION_FIELDS = ["id", "interrupt", "actor", "response", "comment"]
ERROR_EXCERPT = 500


def _data(instance: Any, fields: list[str]) -> dict[str, Any]:
    """JSON-ready fields of a row (foreign keys as ids, dates as ISO 8601)."""
    values = model_to_dict(instance, fields=fields)
    values["id"] = instance.pk  # model_to_dict leaves out fields that are not editable
    return json.loads(json.dumps(values, cls=DjangoJSONEncoder))


def interrupt_data(interrupt_id: str) -> dict[str, Any]:
    interrupt = Interrupt.objects.get(pk=interrupt_id)
    return {**_data(interrupt, INTERRUPT_FIELDS), "created_at": interrupt.created_at.isoformat()}


def invocation_data(invocation_id: Any) -> dict[str, Any]:
    invocation = Invocation.objects.get(pk=invocation_id)
    finished = invocation.finished_at.isoformat() if invocation.finished_at else None
    return {**_data(invocation, INVOCATION_FIELDS), "finished_at": finished}


def decision_data(decision_id: Any) -> dict[str, Any]:
    decision = Decision.objects.select_related("interrupt").get(pk=decision_id)
    return {
        **_data(decision, DECISION_FIELDS),
        "invocation": str(decision.interrupt.invocation_id),
        "interrupt_status": decision.interrupt.status,
        "created_at": decision.created_at.isoformat(),
    }


class _EndpointsKnown:
    """Whether any endpoint is active, remembered for HITL["WEBHOOK_ENDPOINTS_CACHE_SECONDS"]
    so that a project without webhooks pays no query per event. Only "none" saves work:
    "some" still reads the endpoints. Saving or deleting an endpoint forgets the answer in
    its own process at once; other processes see a new endpoint within the cache time."""

    def __init__(self) -> None:
        self._any: bool | None = None
        self._until = 0.0

    def any_active(self) -> bool:
        if self._any is None or time.monotonic() >= self._until:
            self._any = WebhookEndpoint.objects.filter(is_active=True).exists()
            self._until = time.monotonic() + hitl_settings.WEBHOOK_ENDPOINTS_CACHE_SECONDS
        return self._any

    def forget(self, **kwargs: Any) -> None:
        self._any = None


endpoints_known = _EndpointsKnown()


def site_endpoints() -> Any:
    """The active endpoints that hear every invocation (not an A2A task's push config)."""
    return WebhookEndpoint.objects.filter(is_active=True, invocation__isnull=True)


def queue_delivery(endpoint: WebhookEndpoint, event_type: str, payload: Any) -> None:
    """Store one delivery of `payload` to `endpoint`, sent (and retried) after commit."""
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event_type=event_type, payload=payload
    )
    transaction.on_commit(partial(_enqueue, delivery.pk))


def watch_invocation(
    invocation: Invocation, url: str, token: str, *, actor: Any
) -> WebhookEndpoint:
    """An endpoint that hears of `invocation` only (an A2A push notification config made
    by `actor`, who can see the invocation); ValidationError for a URL that is not http or
    https."""
    endpoint = WebhookEndpoint(
        url=url,
        invocation=invocation,
        created_by=actor,
        notification_token=token,
        description=f"A2A push notifications of task {invocation.pk}",
    )
    endpoint.full_clean(exclude=["secret", "events"])
    endpoint.save()
    return endpoint


def stop_watching(endpoint: WebhookEndpoint) -> None:
    """Delete an invocation's endpoint (an A2A push config); its deliveries go with it."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk, invocation__isnull=False).delete()


def queue_event(event_type: str, data: Callable[[], dict[str, Any]]) -> list[WebhookDelivery]:
    """Store a delivery of the event for every active endpoint that wants it, and enqueue
    each after commit. `data` is called only when some endpoint wants the event."""
    if not endpoints_known.any_active():
        return []
    endpoints = [e for e in site_endpoints() if e.wants(event_type)]
    if not endpoints:
        return []
    payload = {"type": event_type, "timestamp": timezone.now().isoformat(), "data": data()}
    with transaction.atomic():
        deliveries = WebhookDelivery.objects.bulk_create(
            WebhookDelivery(endpoint=endpoint, event_type=event_type, payload=payload)
            for endpoint in endpoints
        )
        for delivery in deliveries:
            transaction.on_commit(partial(_enqueue, delivery.pk))
    return deliveries


def _enqueue(delivery_id: Any, countdown: float | None = None) -> None:
    try:
        dispatch.send(dispatch.DELIVER_WEBHOOK, [str(delivery_id)], countdown=countdown)
    except Exception:
        # Stored and pending: an admin "resend" sends it once the broker is back.
        logger.exception("webhook delivery %s not enqueued", delivery_id)


def backoff(retries: int) -> float:
    """Seconds before retry number `retries` + 1: doubling, capped."""
    delay = hitl_settings.WEBHOOK_BACKOFF_SECONDS * 2**retries
    return float(min(delay, hitl_settings.WEBHOOK_MAX_BACKOFF_SECONDS))


def signed_headers(secret: str, message_id: str, body: str, at: datetime) -> dict[str, str]:
    """The headers of a message signed at `at`, an aware UTC time: standardwebhooks signs
    any time as if it were UTC, so a naive local one (timezone.now() with USE_TZ=False)
    would sign another timestamp than the header's."""
    return {
        "Content-Type": "application/json",
        "User-Agent": "django-hitl-workflows",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, at, body),
    }


def secret_problem(secret: str) -> str:
    """Why `secret` cannot sign a Standard Webhooks message; "" when it can."""
    try:
        signed_headers(secret, "msg_check", "{}", datetime.now(UTC))
    except Exception as exc:  # whatever the library raises for it: bad base64, empty...
        return f"this secret cannot sign webhooks ({type(exc).__name__}: {exc})"
    return ""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the endpoint's answer, a failed attempt: following it would turn the
    POST into a body-less GET, to whatever host the Location names."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def _post(url: str, body: str, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST once; the status code (None when there was no HTTP answer) and the error."""
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    try:
        timeout = hitl_settings.WEBHOOK_TIMEOUT_SECONDS
        with _opener.open(request, timeout=timeout) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        excerpt = exc.read(ERROR_EXCERPT).decode(errors="replace")
        if 300 <= exc.code < 400:
            excerpt = f"redirects are not followed (Location: {exc.headers.get('Location')})"
        return exc.code, f"HTTP {exc.code} {exc.reason}: {excerpt}".strip()
    except (OSError, ValueError) as exc:  # refused, timed out, bad URL
        return None, f"{type(exc).__name__}: {exc}"


def _attempt(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """Sign and POST the delivery once: the status code and the error, as _post."""
    body = json.dumps(delivery.payload, separators=(",", ":"))
    # Failed attempts like any other (retried, resendable once the endpoint is fixed). The
    # URL is checked here too: rows made in code skip the model's validation, and urllib
    # would also open file:// and ftp:// URLs.
    try:
        webhook_url_validator(delivery.endpoint.url)
    except ValidationError:
        return None, f"not sent: {delivery.endpoint.url!r} is not an http or https URL"
    problem = secret_problem(delivery.endpoint.secret)
    if problem:
        return None, f"not sent: {problem}; set a new secret on the endpoint"
    headers = signed_headers(delivery.endpoint.secret, str(delivery.pk), body, datetime.now(UTC))
    if delivery.endpoint.notification_token:
        headers["X-A2A-Notification-Token"] = delivery.endpoint.notification_token
    return _post(delivery.endpoint.url, body, headers)


def deliver(delivery_id: Any) -> None:
    """Make one attempt at a pending delivery, record it, and enqueue the next attempt
    after the backoff when it failed and attempts are left."""
    delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != WebhookDelivery.Status.PENDING:
        return
    started = time.perf_counter()
    status_code, error = _attempt(delivery)
    duration_ms = (time.perf_counter() - started) * 1000
    delivered = status_code is not None and 200 <= status_code < 300
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery, status_code=status_code, duration_ms=duration_ms, error=error
        )
        delivery.attempts += 1
        if delivered:
            delivery.status, delivery.delivered_at = (
                WebhookDelivery.Status.DELIVERED,
                timezone.now(),
            )
        elif delivery.attempts >= hitl_settings.WEBHOOK_MAX_ATTEMPTS:
            delivery.status = WebhookDelivery.Status.FAILED
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempts=F("attempts") + 1, status=delivery.status, delivered_at=delivery.delivered_at
        )
    if delivery.status == WebhookDelivery.Status.PENDING:
        # A new task rather than Celery's retry(): it works the same in eager mode.
        _enqueue(delivery.pk, countdown=backoff(delivery.attempts - 1))


def resend(deliveries: Iterable[WebhookDelivery]) -> int:
    """Send deliveries again, whatever became of them, with a fresh round of attempts
    (same webhook-id: a receiver that already has it may drop it). Returns how many."""
    ids = [delivery.pk for delivery in deliveries]
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk__in=ids).update(
            status=WebhookDelivery.Status.PENDING, attempts=0, delivered_at=None
        )
        for pk in ids:
            transaction.on_commit(partial(_enqueue, pk))
    return len(ids)


# --- endpoint secrets -----------------------------------------------------------------------
# A secret signs every message: whoever reads it can forge them. Pages show it masked; the
# one who sets or rotates it sees it once.

CHANGE_ENDPOINT = "workflows.change_webhookendpoint"


def masked_secret(secret: str) -> str:
    """`whsec_…` and the last four characters (of a secret long enough to spare them)."""
    prefix = "whsec_" if secret.startswith("whsec_") else ""
    tail = secret[-4:] if len(secret) - len(prefix) >= 16 else ""
    return f"{prefix}…{tail}"


def rotate_webhook_secret(endpoint: WebhookEndpoint, *, actor: Any) -> str:
    """Give the endpoint a new secret and return it (to show once to `actor`, who must hold
    workflows.change_webhookendpoint; None: the system). Messages signed from now on use
    it, retries of earlier ones included."""
    if actor is not None and not actor.has_perm(CHANGE_ENDPOINT):
        raise PermissionDenied(f"rotating a webhook secret needs {CHANGE_ENDPOINT}")
    endpoint.secret = new_webhook_secret()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(secret=endpoint.secret)
    return endpoint.secret


# --- signal receivers -----------------------------------------------------------------------


def never_raises(receiver: Callable[..., None]) -> Callable[..., None]:
    """A receiver's failure is logged; the write that sent the signal is already committed
    and its caller must not see an error."""

    @wraps(receiver)
    def guarded(*args: Any, **kwargs: Any) -> None:
        try:
            receiver(*args, **kwargs)
        except Exception:
            logger.exception("webhook receiver %s failed", receiver.__name__)

    return guarded


@never_raises
def on_interrupt_opened(sender: Any, interrupt_id: str, **kwargs: Any) -> None:
    queue_event("interrupt.opened", lambda: interrupt_data(interrupt_id))


@never_raises
def on_interrupt_resolved(sender: Any, interrupt_id: str, **kwargs: Any) -> None:
    queue_event("interrupt.resolved", lambda: interrupt_data(interrupt_id))


@never_raises
def on_decision_recorded(sender: Any, decision_id: Any, **kwargs: Any) -> None:
    queue_event("decision.recorded", lambda: decision_data(decision_id))


@never_raises
def on_invocation_finished(sender: Any, invocation_id: Any, **kwargs: Any) -> None:
    queue_event("invocation.finished", lambda: invocation_data(invocation_id))


def connect() -> None:
    """Connect the receivers (WorkflowsConfig.ready)."""
    receivers = [
        (signals.interrupt_opened, on_interrupt_opened),
        (signals.interrupt_resolved, on_interrupt_resolved),
        (signals.decision_recorded, on_decision_recorded),
        (signals.invocation_finished, on_invocation_finished),
    ]
    for signal, receiver in receivers:
        signal.connect(receiver, dispatch_uid=f"hitl-webhooks-{receiver.__name__}")
    for signal in (post_save, post_delete):
        signal.connect(
            endpoints_known.forget, sender=WebhookEndpoint, dispatch_uid="hitl-webhook-endpoints"
        )
