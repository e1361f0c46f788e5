"""Who may change an answer already given (DESIGN 3.8)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from ..models import Interrupt
from .answers import answer_policy
from .persons import holds, person_refusal

REWIND_PERMISSION = "workflows.rewind_interrupt"


def rewind_refusal(user: Any, interrupt: Interrupt) -> str:
    """Why `user` may not change the answer to `interrupt` ("" when they may): the model
    permission `workflows.rewind_interrupt`, and the answer rule for the new answer
    (assignees, delegation, four-eyes)."""
    refused = person_refusal(user)
    if refused:
        return refused
    if not holds(user, REWIND_PERMISSION):
        return f"{user.get_username()} lacks the permission {REWIND_PERMISSION}"
    return answer_policy().refusal(user, interrupt)


def require_rewinder(actor: Any, interrupt: Interrupt) -> None:
    """PermissionDenied unless `actor` (None: the system) may change its answer."""
    if actor is not None:
        refusal = rewind_refusal(actor, interrupt)
        if refusal:
            raise PermissionDenied(refusal)
