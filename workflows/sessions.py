"""Sessions named by a client: an agent protocol's thread (AG-UI's `threadId`) is a session
whose id the client chose. Re-exported by workflows.services (the one write path)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from .models import Session
from .policy import require_person


def open_session(session_id: Any, *, user: Any) -> tuple[Session, bool]:
    """The session of this id, created for `user` when there is none yet; with whether it
    was created. Whether `user` may use an existing one is the caller's question."""
    require_person(user)
    found = Session.objects.filter(pk=session_id).first()
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            return Session.objects.create(id=session_id, created_by_id=user.pk), True
    except IntegrityError:  # created meanwhile by another request
        return Session.objects.get(pk=session_id), False
