"""A question waiting for an answer: the interrupt and the order the inbox reads it in."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..engine.escalation import DEFAULT_PRIORITY, PRIORITIES
from ..engine.status import InterruptStatus
from .invocations import Invocation
from .querysets import ANSWERED_STATUSES

INTERRUPT_STATUS_CHOICES = [(s.value, s.value.title()) for s in InterruptStatus]
PRIORITY_CHOICES = [(p, p.title()) for p in PRIORITIES]
# The inbox sorts on a number, urgent (0) first: a column an index orders, unlike the name.
PRIORITY_RANKS = {priority: rank for rank, priority in enumerate(reversed(PRIORITIES))}


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
    # A decision counts only with the approver's WebAuthn assertion (workflows.services.passkeys).
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
            # The inbox's order (workflows.inbox.inbox.INBOX_ORDER): its first page is
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
