"""What a question shows to someone who may see its invocation: the envelope when the inbox
would show them the question (the answer rule), else only that it waits on others."""

from __future__ import annotations

from typing import Any

from workflows.engine import InterruptStatus
from workflows.models import Interrupt
from workflows.policy import may_read_question

from .envelope import envelope, question_kind


def withheld(interrupt: Interrupt) -> dict[str, Any]:
    """A question for someone else: its id, kind and status, no payload, no message."""
    return {
        "id": interrupt.pk,
        "kind": question_kind(interrupt),
        "status": interrupt.status,
        "answerable": False,
        "waiting_on_others": interrupt.status == InterruptStatus.PENDING,
    }


def shown(interrupt: Interrupt, user: Any) -> dict[str, Any]:
    """The question as `user` may see it."""
    return envelope(interrupt, user) if may_read_question(user, interrupt) else withheld(interrupt)


def questions(ids: list[str]) -> dict[str, Interrupt]:
    """The interrupts of these ids, with what the envelope reads."""
    found = Interrupt.objects.filter(pk__in=ids).select_related("invocation")
    found = found.prefetch_related("decisions")
    return {interrupt.pk: interrupt for interrupt in found}
