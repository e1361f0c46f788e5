"""The authentication backend that answers the workflows app's object permissions with its
policies, so the admin, DRF permission classes, templates and the services all ask the
same question:

- `user.has_perm("workflows.answer_interrupt", interrupt)`: the answer policy;
- `user.has_perm("workflows.rewind_interrupt", interrupt)`: may change its answer
  (`policy.rewind_refusal`: the model permission and the answer rule);
- `user.has_perm("workflows.cancel_invocation", invocation)` and
  `"workflows.retry_invocation"`: `InvocationControlPolicy` (the model permission, or the
  user who started the invocation).

Add it next to Django's ModelBackend:

    AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "workflows.backends.AnswerPermissionBackend",
    ]

Why not the `rules` package: the rules are a few permissions on two models, and the answer
rule needs a queryset counterpart that `rules` does not provide; registering predicates
with `rules` would still leave the policy classes (and the queryset half) to write, plus a
dependency. This backend is the lines `rules` would otherwise be configured with.
"""

from __future__ import annotations

from typing import Any

from .models import Interrupt, Invocation
from .policy import (
    ANSWER_PERMISSION,
    REWIND_PERMISSION,
    InvocationControlPolicy,
    answer_policy,
    rewind_refusal,
)


class AnswerPermissionBackend:
    """Object permissions only. Without an object it says nothing, and ModelBackend answers
    for the model permission."""

    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def has_perm(self, user: Any, perm: str, obj: Any = None) -> bool:
        if perm == ANSWER_PERMISSION and isinstance(obj, Interrupt):
            return answer_policy().can_answer(user, obj)
        if perm == REWIND_PERMISSION and isinstance(obj, Interrupt):
            return not rewind_refusal(user, obj)
        if perm in InvocationControlPolicy.permissions and isinstance(obj, Invocation):
            return InvocationControlPolicy().may_control(user, perm, obj)
        return False
