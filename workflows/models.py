"""Durable state: sessions, invocations, node-run checkpoints, events and interrupts."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .conf import hitl_settings
from .engine.escalation import DEFAULT_PRIORITY, PRIORITIES
from .engine.status import InterruptStatus, NodeStatus
from .querysets import ANSWERED_STATUSES, OPEN_STATUSES, InvocationQuerySet

STATUS_CHOICES = [(s.value, s.value.title()) for s in NodeStatus]
# An invocation is never SUPERSEDED: only node runs are (DESIGN 3.5).
INVOCATION_STATUS_CHOICES = [c for c in STATUS_CHOICES if c[0] != NodeStatus.SUPERSEDED]
INTERRUPT_STATUS_CHOICES = [(s.value, s.value.title()) for s in InterruptStatus]
PRIORITY_CHOICES = [(p, p.title()) for p in PRIORITIES]
# The inbox sorts on a number, urgent (0) first: a column an index orders, unlike the name.
PRIORITY_RANKS = {priority: rank for rank, priority in enumerate(reversed(PRIORITIES))}


class Session(models.Model):
    """Groups the invocations of one conversation or case."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"session {self.id}"


class Invocation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="invocations")
    workflow_name = models.CharField(max_length=200)
    workflow_version = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=INVOCATION_STATUS_CHOICES, default=NodeStatus.PENDING
    )
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # An answer was changed (DESIGN 3.8): its next outcome is a rewound one.
    rewound = models.BooleanField(default=False)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # One engine execution at a time: the owner renews the lease at every checkpoint.
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Run-task deliveries that started and did not finish (poison-message guard).
    unfinished_deliveries = models.PositiveSmallIntegerField(default=0)
    # When recover_stalled last enqueued a run (it does so at most once per period).
    recovery_enqueued_at = models.DateTimeField(null=True, blank=True)
    # services.start(idempotency_key=...): a client's retry returns this invocation.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    # The entry_hash of the newest AuditEntry of this invocation: its chain's head, kept on
    # the row every write path locks first, so each invocation's chain advances on its own.
    audit_head = models.CharField(max_length=64, blank=True, default="", editable=False)

    objects = InvocationQuerySet.as_manager()
    # Not stored: the admin's list prefetches the pending interrupts here.
    pending_interrupts: "list[Interrupt]"

    class Meta:
        ordering = ["-created_at"]
        # The monitor's admin actions; rows change only through workflows.services.
        permissions = [
            ("cancel_invocation", "Can cancel invocations"),
            ("retry_invocation", "Can retry failed invocations"),
        ]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="hitl_inv_status"),
            models.Index(fields=["workflow_name", "status"], name="hitl_inv_workflow"),
            models.Index(
                fields=["updated_at"],
                name="hitl_inv_open",
                condition=Q(status__in=OPEN_STATUSES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name} {self.id} ({self.get_status_display()})"


class NodeRun(models.Model):
    """The checkpoint of one node run: what resume reloads, keyed by (invocation, path)."""

    # Indexed by the (invocation, path) constraint; a second index would only slow writes.
    invocation = models.ForeignKey(
        Invocation, on_delete=models.CASCADE, related_name="node_runs", db_index=False
    )
    path = models.CharField(max_length=1000)
    parent_path = models.CharField(max_length=1000, blank=True)
    name = models.CharField(max_length=200)
    run_id = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=STATUS_CHOICES)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    route = models.CharField(max_length=200, blank=True)
    interrupt_ids = models.JSONField(default=list, blank=True)
    resume_inputs = models.JSONField(default=dict, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    error = models.TextField(blank=True)
    # What its approval gate decided, once per run: approved, edited, rejected or passed
    # on a grant, and by whom (a re-execution reuses it).
    gate = models.JSONField(null=True, blank=True)
    # What dispatched it (DESIGN 3.8): the path of the run whose output triggered it, null
    # for START, a dynamic parent or a parallel worker, {predecessor: path} for a join;
    # "?" on runs stored before the lineage was (a rewind refuses those).
    triggered_by = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["invocation", "id"]
        constraints = [
            models.UniqueConstraint(fields=["invocation", "path"], name="hitl_noderun_path")
        ]

    def __str__(self) -> str:
        return self.path


class SessionEvent(models.Model):
    """Append-only history; the id orders it."""

    invocation = models.ForeignKey(
        Invocation, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    author = models.CharField(max_length=200)
    path = models.CharField(max_length=1000, blank=True)
    run_id = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, blank=True)
    output = models.JSONField(null=True, blank=True)
    route = models.CharField(max_length=200, blank=True)
    function_calls = models.JSONField(default=list, blank=True)
    function_responses = models.JSONField(default=list, blank=True)
    long_running_tool_ids = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    timestamp = models.FloatField()
    # A changed answer (DESIGN 3.8) and the position, among the invocation's events, of
    # the user event whose answer it replaces.
    rewound = models.BooleanField(default=False)
    replaces = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["invocation", "id"], name="hitl_event_invocation")]

    def __str__(self) -> str:
        return f"{self.author} @ {self.path or '-'}"


class Interrupt(models.Model):
    """A question waiting for an answer. Its id is the FunctionCall id; it routes an
    answer to its invocation without reading any history."""

    id = models.CharField(primary_key=True, max_length=255)
    invocation = models.ForeignKey(
        Invocation, on_delete=models.CASCADE, related_name="interrupts", db_index=False
    )
    workflow_name = models.CharField(max_length=200)
    path = models.CharField(max_length=1000)
    run_id = models.PositiveIntegerField()
    message = models.TextField(blank=True)
    payload = models.JSONField(null=True, blank=True)
    response_schema = models.JSONField(null=True, blank=True)
    # Who answers: "user:<username>"/"group:<name>" strings; empty: anyone
    # with the answer permission. `quorum` approvals answer; `four_eyes` bars the starter.
    assignees = models.JSONField(default=list, blank=True)
    quorum = models.PositiveSmallIntegerField(default=1)
    four_eyes = models.BooleanField(default=False)
    # A decision counts only with the approver's WebAuthn assertion (workflows.passkeys).
    require_signature = models.BooleanField(default=False)
    # {column: workflows.engine.values.key_order(value)} of payload, response_schema and
    # on_timeout: the key order declared, which PostgreSQL's jsonb does not keep.
    key_order = models.JSONField(default=dict, blank=True, editable=False)
    # Who is working on it: a hint for colleagues, never a lock.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=INTERRUPT_STATUS_CHOICES, default=InterruptStatus.PENDING
    )
    # 1, plus one each time it is asked again under the same id (DESIGN 3.8).
    round = models.PositiveIntegerField(default=1)
    deadline = models.DateTimeField(null=True, blank=True)
    timeout_seconds = models.FloatField(null=True, blank=True)
    on_timeout = models.JSONField(null=True, blank=True, help_text="null: fail on timeout")
    # The people layer (DESIGN 4.3): a priority and a due date (a target, not the deadline)
    # order the inbox; `escalation` is the ladder as asked (Escalation.to_dict steps),
    # `escalation_step` how many steps the sweep applied, `next_escalation_at` when the
    # next one is due (null: none left).
    priority = models.CharField(max_length=8, choices=PRIORITY_CHOICES, default=DEFAULT_PRIORITY)
    priority_rank = models.GeneratedField(
        expression=models.Case(
            *(models.When(priority=p, then=models.Value(r)) for p, r in PRIORITY_RANKS.items()),
            default=models.Value(PRIORITY_RANKS[DEFAULT_PRIORITY]),
        ),
        output_field=models.PositiveSmallIntegerField(),
        db_persist=True,
    )
    due_at = models.DateTimeField(null=True, blank=True)
    due_seconds = models.FloatField(null=True, blank=True)
    escalation = models.JSONField(default=list, blank=True)
    escalation_step = models.PositiveSmallIntegerField(default=0)
    next_escalation_at = models.DateTimeField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    consumed = models.BooleanField(default=False)
    # Answered, but the last pass did not reach its node run: not work waiting (recovery
    # skips it), still applied when a later pass reaches the node run.
    deferred = models.BooleanField(default=False)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Not stored: set by the admin's invocation page for its template.
    url: str
    response_json: str | None

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("answer_interrupt", "Can answer interrupts"),
            ("reassign_interrupt", "Can reassign any interrupt"),
            ("rewind_interrupt", "Can change answers already given"),
        ]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="hitl_interrupt_inbox"),
            models.Index(fields=["invocation", "status"], name="hitl_interrupt_invocation"),
            # The inbox's order (workflows.people.inbox.INBOX_ORDER): its first page is
            # read from the index, whatever the number of pending questions. (An ascending
            # index keeps NULLs last on PostgreSQL, as the order does; SQLite cannot say
            # NULLS LAST in an index and sorts the due dates of the rows it reads.)
            models.Index(
                fields=["priority_rank", "due_at", "created_at", "id"],
                name="hitl_interrupt_inbox_order",
                condition=Q(status=InterruptStatus.PENDING),
            ),
            # The "claimed by me" view in the inbox's order: one person's page read from
            # the index, not picked out of everyone's walk of the order above.
            models.Index(
                fields=["claimed_by", "priority_rank", "due_at", "created_at", "id"],
                name="hitl_interrupt_claimed_order",
                condition=Q(status=InterruptStatus.PENDING),
            ),
            models.Index(
                fields=["due_at"],
                name="hitl_interrupt_due",
                condition=Q(status=InterruptStatus.PENDING, due_at__isnull=False),
            ),
            models.Index(
                fields=["deadline"],
                name="hitl_interrupt_deadline",
                condition=Q(status=InterruptStatus.PENDING, deadline__isnull=False),
            ),
            models.Index(
                fields=["next_escalation_at"],
                name="hitl_interrupt_escalation",
                condition=Q(status=InterruptStatus.PENDING, next_escalation_at__isnull=False),
            ),
            models.Index(
                fields=["invocation"],
                name="hitl_interrupt_unconsumed",
                condition=Q(consumed=False, status__in=ANSWERED_STATUSES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.get_status_display()})"


class Decision(models.Model):
    """One person's answer to an interrupt: immutable, one per person.
    Enough of them (the interrupt's quorum) become its FunctionResponse."""

    interrupt = models.ForeignKey(Interrupt, on_delete=models.CASCADE, related_name="decisions")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The person `actor` stood in for (a delegate deciding for them), else null.
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    response = models.JSONField()
    comment = models.TextField(blank=True)
    # The question's round it was given in: an earlier round's decisions are history.
    round = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["interrupt", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["interrupt", "round", "actor"], name="hitl_decision_once_a_round"
            )
        ]

    def __str__(self) -> str:
        return f"{self.actor} on {self.interrupt_id}"


PASSKEY_NAME_LENGTH = 100


class PasskeyCredential(models.Model):
    """A passkey or security key a person registered (WebAuthn) to sign decisions with.
    Written only by workflows.passkeys; `rp_id` and `origin` are where it was registered,
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


# --- Audit trail -----------------------------------------------------------------------------


class AuditEntry(models.Model):
    """One action on a question or an invocation, appended in the change's transaction and
    hash-chained (docs/audit.md). Written only by workflows.audit.trail.record; never
    updated or deleted (on PostgreSQL a trigger refuses both, whatever the session sets)."""

    # PROTECT: deleting an invocation, or a user, must not delete (or rewrite) its trail.
    invocation = models.ForeignKey(
        Invocation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_entries",
        db_index=False,  # the (invocation, id) index serves it
    )
    # null, not "": the entry concerns no question (actions on the invocation, outside one).
    interrupt_id = models.CharField(  # noqa: DJ001
        max_length=255, null=True, blank=True, db_index=True
    )
    # No choices: the actions grow without a migration (workflows.audit.actions lists them).
    action = models.CharField(max_length=64)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="null: the system (a node, a command, a periodic sweep)",
    )
    actor_name = models.CharField(max_length=255, blank=True, help_text="the username then")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    data = models.JSONField(default=dict, blank=True)
    subject_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of what the question asked"
    )
    prev_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(db_index=True)
    # The RFC 8785 text entry_hash covers ("": an entry from before, see docs/audit.md).
    canonical_text = models.TextField(blank=True, default="", editable=False)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["invocation", "id"], name="hitl_audit_chain")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or 'the system'}"


class AuditChainHead(models.Model):
    """The head of the chain of actions outside any invocation: one row, locked by each
    such action while it appends."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    entry_hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return self.entry_hash


# --- API idempotency and webhooks -------------------------------------------------------------


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


class Heartbeat(models.Model):
    """When a process last showed it is alive: a Celery worker, or the periodic jobs
    (beat's tasks or `manage.py hitl_periodic`). `manage.py hitl_status` reads these."""

    WORKER = "worker"
    PERIODIC = "periodic"
    KIND_CHOICES = [(WORKER, "Celery worker"), (PERIODIC, "Periodic jobs")]

    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    name = models.CharField(max_length=255, help_text="worker host name, or what ran the jobs")
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="hitl_heartbeat_kind_name")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


# Agent actions (approval gates' grants, effects) have a module of their own.
from .gate_models import Effect, Grant, GrantUse  # noqa: E402, F401
from .passkey_models import PasskeyChallenge  # noqa: E402, F401
from .people_models import Delegation, NotificationAttempt  # noqa: E402, F401
from .protocol_models import McpRequestState  # noqa: E402, F401
from .webhook_models import (  # noqa: E402, F401
    WEBHOOK_EVENTS,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    new_webhook_secret,
    webhook_url_validator,
)
