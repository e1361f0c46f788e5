"""AG-UI's `resume[]` (DESIGN 4.5, "AG-UI 1.0"): the answers of a RunAgentInput, given in
one transaction through workflows.services, which apply every rule of the question; an
entry the services refuse refuses the whole resume, and nothing is stored."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from workflows import services
from workflows.engine.errors import WorkflowError
from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt, Session

from .envelope import question_kind


class ResumeRefusedError(Exception):
    """A resume entry the services (or the question's binding) refused: `code` names why,
    `interrupt_id` which entry."""

    def __init__(self, code: str, interrupt_id: str, detail: str) -> None:
        super().__init__(f"interrupt {interrupt_id!r}: {detail}")
        self.code = code
        self.interrupt_id = interrupt_id


def _interrupt(entry: Any, session: Session) -> Interrupt:
    found = (
        Interrupt.objects.select_related("invocation")
        .filter(pk=entry.interrupt_id, invocation__session=session)
        .first()
    )
    if found is None:
        raise ResumeRefusedError(
            "unknown_interrupt", entry.interrupt_id, "no such question on this thread"
        )
    return found


def _replayed(interrupt: Interrupt, entry: Any, user: Any) -> bool:
    """The same answer by the same person again: already given, nothing to do."""
    return any(
        d.actor_id == user.pk and d.response == entry.payload for d in interrupt.decisions.all()
    )


def _check_binding(interrupt: Interrupt) -> None:
    """An answer is bound to what was asked: not after the question's deadline (the
    services bind a gate's answer to the action it approves)."""
    if interrupt.deadline is not None and interrupt.deadline <= timezone.now():
        raise ResumeRefusedError(
            "interrupt_expired",
            interrupt.pk,
            f"the question expired at {interrupt.deadline.isoformat()}",
        )


def _answer(interrupt: Interrupt, entry: Any, user: Any) -> None:
    metadata = entry.metadata or {}
    if question_kind(interrupt) == "tool_call":  # a tool's result: a machine answer
        payload = interrupt.payload or {}
        response = {"id": interrupt.pk, "name": payload.get("name", "")}
        services.submit_function_responses([{**response, "response": entry.payload}], actor=user)
        return
    services.decide(
        interrupt.pk,
        entry.payload,
        actor=user,
        comment=str(metadata.get("comment") or ""),
        assertion=metadata.get("assertion"),
        action_fingerprint=metadata.get("actionFingerprint"),
    )


def answer(entries: list[Any], session: Session, user: Any) -> str | None:
    """Give the resolved entries' answers as `user`, all or none; `cancelled` entries leave
    their questions open. Returns the invocation they belong to (None: no entries).
    Raises ResumeRefusedError."""
    invocation_id = None
    with transaction.atomic():
        for entry in entries:
            interrupt = _interrupt(entry, session)
            if invocation_id not in (None, str(interrupt.invocation_id)):
                raise ResumeRefusedError(
                    "multiple_invocations", interrupt.pk, "answers one run's questions only"
                )
            invocation_id = str(interrupt.invocation_id)
            if entry.status == "cancelled" or _replayed(interrupt, entry, user):
                continue
            if interrupt.status == InterruptStatus.PENDING:
                _check_binding(interrupt)
            try:
                _answer(interrupt, entry, user)
            except (WorkflowError, PermissionDenied) as exc:
                code = getattr(exc, "code", None) or "permission_denied"
                raise ResumeRefusedError(code, interrupt.pk, str(exc)) from exc
    return invocation_id
