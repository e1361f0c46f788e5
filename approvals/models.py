"""The approvals app's models, proxies with no table of their own: pending interrupts as
staff see them (the inbox), and the passkeys a person signs decisions with. Decisions
themselves are `workflows.models.Decision`."""

from typing import Any, cast

from django.db.models import QuerySet

from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt, PasskeyCredential
from workflows.policy import answer_policy


class PendingApproval(Interrupt):
    class Meta:
        proxy = True
        verbose_name = "pending approval"
        verbose_name_plural = "pending approvals"
        # Seeing and answering is `workflows.answer_interrupt`; no permissions of its own.
        default_permissions = ()


class Passkey(PasskeyCredential):
    class Meta:
        proxy = True
        verbose_name = "passkey"
        verbose_name_plural = "passkeys"
        # Everyone manages their own passkeys, nobody anyone else's: no permissions.
        default_permissions = ()


def inbox(user: Any) -> QuerySet[PendingApproval]:
    """Pending interrupts `user` may answer and has not decided on yet."""
    pending = PendingApproval.objects.filter(status=InterruptStatus.PENDING)
    answerable = answer_policy().answerable(user, pending)  # of the model it is given
    return cast("QuerySet[PendingApproval]", answerable.exclude(decisions__actor=user.pk))
