"""The inbox's model: pending interrupts as staff see them (a proxy, no table of its own).
Decisions themselves are `workflows.models.Decision`."""

from typing import Any, cast

from django.db.models import QuerySet

from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt
from workflows.policy import answer_policy


class PendingApproval(Interrupt):
    class Meta:
        proxy = True
        verbose_name = "pending approval"
        verbose_name_plural = "pending approvals"
        # Seeing and answering is `workflows.answer_interrupt`; no permissions of its own.
        default_permissions = ()


def inbox(user: Any) -> QuerySet[PendingApproval]:
    """Pending interrupts `user` may answer and has not decided on yet."""
    pending = PendingApproval.objects.filter(status=InterruptStatus.PENDING)
    answerable = answer_policy().answerable(user, pending)  # of the model it is given
    return cast("QuerySet[PendingApproval]", answerable.exclude(decisions__actor=user.pk))
