"""The approvals app's models, proxies with no table of their own: pending interrupts as
staff see them (the inbox), and the passkeys a person signs decisions with. Decisions
themselves are `workflows.models.Decision`."""

from typing import Any, cast

from django.db import models
from django.db.models import QuerySet

from workflows.inbox import waiting_for
from workflows.models import Interrupt, PasskeyCredential


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
    order (workflows.inbox.inbox)."""
    return cast("QuerySet[PendingApproval]", waiting_for(user, None, PendingApproval.objects.all()))


class SlackMessage(models.Model):
    """A message the Slack notifier posted about a question, kept so that it can be
    updated (chat.update names a message by its channel and timestamp) when the question
    is reminded, escalated or decided."""

    interrupt = models.ForeignKey(
        "workflows.Interrupt", on_delete=models.CASCADE, related_name="slack_messages"
    )
    # The HITL["SLACK"]["USERS"] key it was posted for ("user:ada", "group:finance"); empty
    # for HITL["SLACK"]["CHANNEL"].
    assignee = models.CharField(max_length=255, blank=True)
    channel = models.CharField(max_length=64)  # as Slack answered: a direct message's id
    ts = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["interrupt", "assignee"], name="approvals_slack_one_per_assignee"
            )
        ]

    def __str__(self) -> str:
        return f"{self.interrupt_id} in {self.channel} ({self.ts})"
