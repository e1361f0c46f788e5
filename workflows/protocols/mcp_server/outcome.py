"""Where an invocation stands for one user, read after a start or an answer: its status,
its output or error, and its open questions as envelopes (DESIGN 4.5)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections

from ...engine.status import InterruptStatus, NodeStatus
from ...models import Interrupt, Invocation
from ...policy import visible_invocations
from ..envelope import envelope
from .errors import NOT_FOUND, refusal

# How long a call waits for the run it started or resumed to stop (on a question, or at
# its end) before it answers with the run still going.
SETTLE_SECONDS = 10.0
POLL_SECONDS = 0.05


@dataclass
class Outcome:
    invocation_id: str
    workflow: str
    status: str
    visible: bool
    created_at: datetime
    updated_at: datetime
    output: Any = None
    error: str = ""
    questions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        """Stopped: at its end, or waiting on a question still open (WAITING with none
        open is an answer accepted whose run has not started yet)."""
        if NodeStatus(self.status).is_final:
            return True
        return self.status == NodeStatus.WAITING and bool(self.questions)

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"invocation_id": self.invocation_id, "workflow": self.workflow}
        if self.visible:
            shown.update(status=self.status, output=self.output, error=self.error or None)
        shown["questions"] = self.questions
        return json.loads(json.dumps(shown, cls=DjangoJSONEncoder))


def unknown_invocation(invocation_id: Any) -> Exception:
    return refusal("unknown_invocation", f"no invocation {invocation_id} of yours", NOT_FOUND)


def read_outcome(invocation_id: Any, user: Any) -> Outcome:
    """The invocation as `user` sees it: all of it when they may see it (having started
    it, or `workflows.view_invocation`), else only the questions they may answer."""
    close_old_connections()
    invocation = (
        Invocation.objects.filter(pk=str(invocation_id)).first()
        if _is_uuid(invocation_id)
        else None
    )
    if invocation is None:
        raise unknown_invocation(invocation_id)
    visible = visible_invocations(user, Invocation.objects.filter(pk=invocation.pk)).exists()
    pending = (
        Interrupt.objects.filter(invocation=invocation, status=InterruptStatus.PENDING)
        .select_related("invocation")
        .prefetch_related("decisions")
        .order_by("created_at", "id")
    )
    questions = [envelope(interrupt, user) for interrupt in pending]
    if not visible:
        questions = [q for q in questions if q["answerable"]]
    return Outcome(
        invocation_id=str(invocation.pk),
        workflow=invocation.workflow_name,
        status=invocation.status,
        visible=visible,
        created_at=invocation.created_at,
        updated_at=invocation.updated_at,
        output=invocation.output,
        error=invocation.error,
        questions=questions,
    )


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


async def settle(invocation_id: Any, user: Any, wait: float = SETTLE_SECONDS) -> Outcome:
    """The outcome once the run stopped, or as it stands after `wait` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        outcome = await sync_to_async(read_outcome)(invocation_id, user)
        if outcome.settled or loop.time() >= deadline:
            return outcome
        await asyncio.sleep(POLL_SECONDS)
