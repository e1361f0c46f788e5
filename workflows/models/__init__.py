"""Every table of the app, one module per concept. Callers import from `workflows.models`
only; the modules below are where each concept lives, not import paths."""

from .audit import AuditChainHead, AuditEntry
from .decisions import Decision
from .delegations import Delegation
from .effects import Effect
from .grants import Grant, GrantQuerySet, GrantUse, live_at, new_grant_id
from .heartbeats import Heartbeat
from .idempotency import IdempotencyKey
from .interrupts import INTERRUPT_STATUS_CHOICES, PRIORITY_CHOICES, PRIORITY_RANKS, Interrupt
from .invocations import STATUS_CHOICES, Invocation, NodeRun, Session, SessionEvent
from .notifications import NOTIFY_EVENTS, NotificationAttempt
from .passkeys import PASSKEY_NAME_LENGTH, PasskeyChallenge, PasskeyCredential, new_nonce
from .protocols import McpRequestState
from .querysets import ANSWERED_STATUSES, OPEN_STATUSES, InvocationQuerySet
from .webhooks import (
    WEBHOOK_EVENTS,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    new_webhook_secret,
    webhook_url_validator,
)

__all__ = [
    "ANSWERED_STATUSES",
    "INTERRUPT_STATUS_CHOICES",
    "NOTIFY_EVENTS",
    "OPEN_STATUSES",
    "PASSKEY_NAME_LENGTH",
    "PRIORITY_CHOICES",
    "PRIORITY_RANKS",
    "STATUS_CHOICES",
    "WEBHOOK_EVENTS",
    "AuditChainHead",
    "AuditEntry",
    "Decision",
    "Delegation",
    "Effect",
    "Grant",
    "GrantQuerySet",
    "GrantUse",
    "Heartbeat",
    "IdempotencyKey",
    "Interrupt",
    "Invocation",
    "InvocationQuerySet",
    "McpRequestState",
    "NodeRun",
    "NotificationAttempt",
    "PasskeyChallenge",
    "PasskeyCredential",
    "Session",
    "SessionEvent",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "live_at",
    "new_grant_id",
    "new_nonce",
    "new_webhook_secret",
    "webhook_url_validator",
]
