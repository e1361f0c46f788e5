"""One person's answer to a question."""

from django.conf import settings
from django.db import models

from .interrupts import Interrupt


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
