"""The approvals app's models, proxies with no table of their own: pending interrupts as
staff see them (the inbox), and the passkeys a person signs decisions with. Decisions
themselves are `workflows.models.Decision`."""

from typing import Any, cast

from django.db.models import QuerySet

from workflows.models import Interrupt, PasskeyCredential
from workflows.people.inbox import waiting_for


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
    """Pending interrupts `user` may answer and has not decided on yet, in the inbox's
    order (workflows.people.inbox)."""
    return cast("QuerySet[PendingApproval]", waiting_for(user, None, PendingApproval.objects.all()))
