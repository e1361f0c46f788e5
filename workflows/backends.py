"""The authentication backend that answers `user.has_perm("workflows.answer_interrupt",
interrupt)` with the answer policy, so the admin, DRF permission classes and
templates all ask the same question. Add it next to Django's ModelBackend:

    AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "workflows.backends.AnswerPermissionBackend",
    ]

Why not the `rules` package: the rule is one permission on one model, and it needs a
queryset counterpart that `rules` does not provide; registering a predicate with `rules`
would still leave the policy class (and its queryset half) to write, plus a dependency.
This backend is the ten lines `rules` would otherwise be configured with.
"""

from __future__ import annotations

from typing import Any

from .models import Interrupt
from .policy import ANSWER_PERMISSION, answer_policy


class AnswerPermissionBackend:
    """Object permission only: `has_perm(user, "workflows.answer_interrupt", interrupt)`.
    Without an object it says nothing, and ModelBackend answers for the model permission."""

    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def has_perm(self, user: Any, perm: str, obj: Any = None) -> bool:
        if perm != ANSWER_PERMISSION or not isinstance(obj, Interrupt):
            return False
        return answer_policy().can_answer(user, obj)
