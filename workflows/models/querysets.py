"""The named questions asked of invocations: which are open, which hold a live lease, and
which are stalled (one rule for recovery and for `hitl_status`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from ..engine.status import InterruptStatus, NodeStatus

OPEN_STATUSES = [NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.WAITING]
# An interrupt with an answer: a person's (or a node's), or its on_timeout default.
ANSWERED_STATUSES = [InterruptStatus.RESOLVED, InterruptStatus.EXPIRED]


class InvocationQuerySet(models.QuerySet):
    def open(self) -> InvocationQuerySet:
        """The invocations that have not finished."""
        return self.filter(status__in=OPEN_STATUSES)

    def leased(self) -> InvocationQuerySet:
        """The invocations a run holds: a lease is live until it expires by the database's
        clock (not this process's)."""
        return self.filter(Q(lease_expires_at__gte=Now()) & ~Q(lease_owner=""))

    def stalled(self, now: datetime, older_than: timedelta) -> InvocationQuerySet:
        """The open invocations nobody is running although they have work: their run died
        (its lease expired: a live run's heartbeat renews it), they were never picked up
        (PENDING or RUNNING with no lease for `older_than`), or they hold answers no pass
        has seen for `older_than`."""
        before = now - older_than
        # Reached through the relation: invocations.py imports this module, not the reverse.
        interrupt_model = self.model._meta.get_field("interrupts").related_model
        assert isinstance(interrupt_model, type)  # a model class, never None or "self"
        interrupts = interrupt_model._default_manager
        unleased = Q(lease_owner="") | Q(lease_expires_at__lt=Now())
        died = ~Q(lease_owner="") & Q(lease_expires_at__lt=Now())
        never_taken = Q(
            lease_owner="",
            updated_at__lt=before,
            status__in=[NodeStatus.PENDING, NodeStatus.RUNNING],
        )
        unseen_answers = unleased & Q(
            pk__in=interrupts.filter(
                consumed=False,
                deferred=False,
                status__in=ANSWERED_STATUSES,
                resolved_at__lt=before,
            ).values("invocation_id")
        )
        return self.filter(Q(status__in=OPEN_STATUSES) & (died | never_taken | unseen_answers))
