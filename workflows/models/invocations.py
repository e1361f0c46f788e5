"""Durable state of a run: sessions, invocations, node-run checkpoints and the event history."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..engine.status import NodeStatus
from .querysets import OPEN_STATUSES, InvocationQuerySet

if TYPE_CHECKING:
    from .interrupts import Interrupt

STATUS_CHOICES = [(s.value, s.value.title()) for s in NodeStatus]
# An invocation is never SUPERSEDED: only node runs are (DESIGN 3.5).
INVOCATION_STATUS_CHOICES = [c for c in STATUS_CHOICES if c[0] != NodeStatus.SUPERSEDED]


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
    pending_interrupts: list[Interrupt]

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
