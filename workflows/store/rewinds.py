"""What the Django store reads for a rewind (DESIGN 3.8) beside the checkpoint: off the
step path, so the ORM where it is simpler."""

from __future__ import annotations

from typing import Any

from ..engine.errors import InvocationNotFoundError
from ..engine.state import RewindReads
from ..models import SessionEvent
from . import actions
from . import statements as sql
from .rows import interrupt_record

# The authors of the events that answer a question: a person (or system), or a timeout.
ANSWER_AUTHORS = ("user", "timeout")


def answer_position(using: str, invocation_id: Any, interrupt_id: str) -> int | None:
    """The position among the invocation's events of the last event answering
    `interrupt_id` (None: none): the answer events read, newest first, not the others."""
    events = SessionEvent.objects.using(using).filter(invocation_id=invocation_id)
    answers = events.filter(author__in=ANSWER_AUTHORS).order_by("-id")
    for event_pk, responses in answers.values_list("id", "function_responses").iterator():
        if any(r.get("id") == interrupt_id for r in responses or ()):
            return events.filter(id__lt=event_pk).count()
    return None


class RewindReading:
    """DjangoStore's `load_rewind_reads` (Store protocol) and its synchronous core."""

    using: str
    dialect: Any
    load_checkpoint_sync: Any
    _call: Any

    def load_rewind_reads_sync(self, invocation_id: str, interrupt_id: str) -> RewindReads:
        checkpoint = self.load_checkpoint_sync(invocation_id)
        if checkpoint is None:
            raise InvocationNotFoundError(invocation_id)
        pk = self.dialect.pk(invocation_id)
        questions = map(interrupt_record, self.dialect.select(sql.invocation_interrupts(pk)))
        return RewindReads(
            checkpoint=checkpoint,
            questions={q.id: q for q in questions},
            effects=actions.invocation_effects(self.using, invocation_id),
            answer_position=answer_position(self.using, invocation_id, interrupt_id),
        )

    async def load_rewind_reads(self, invocation_id: str, interrupt_id: str) -> RewindReads:
        return await self._call(self.load_rewind_reads_sync, invocation_id, interrupt_id)
