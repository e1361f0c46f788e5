"""An entry's fields as its hashes cover them, and what a question asked."""

from __future__ import annotations

from typing import Any

from ..models import AuditEntry
from .canonical import timestamp


def entry_content(entry: AuditEntry) -> dict[str, Any]:
    """The ENTRY_FIELDS of an entry as its entry_hash covers them."""
    return {
        "invocation": str(entry.invocation_id) if entry.invocation_id is not None else None,
        "interrupt_id": entry.interrupt_id,
        "action": entry.action,
        "actor": str(entry.actor_id) if entry.actor_id is not None else None,
        "actor_name": entry.actor_name,
        "on_behalf_of": str(entry.on_behalf_of_id) if entry.on_behalf_of_id is not None else None,
        "data": entry.data,
        "subject_hash": entry.subject_hash,
        "prev_hash": entry.prev_hash,
        "created_at": timestamp(entry.created_at) if entry.created_at else None,
    }


def question_subject(interrupt: Any) -> dict[str, Any]:
    """What a question asked, as its subject_hash covers it: an Interrupt row, or the
    engine's InterruptRecord (its `request`)."""
    request = getattr(interrupt, "request", interrupt)
    return {
        "message": request.message,
        "payload": request.payload,
        "response_schema": request.response_schema,
    }
