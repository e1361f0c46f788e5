"""Who may do what through the API: DRF permission classes, each asking workflows.policy.

- Every endpoint needs a signed-in user, whatever the host's DRF defaults (the token
  endpoint aside: it is how one signs in).
- Starting an invocation needs the model permission `workflows.add_invocation`.
- Answering, deciding, claiming and releasing ask the answer rule the Django way,
  `user.has_perm("workflows.answer_interrupt", interrupt)`; lists of interrupts are scoped
  with the rule's queryset counterpart (`answer_policy().answerable`). A question outside
  it is a 404 for every action, as for its detail (its existence is not told); releasing
  also finds the caller's own claims, and every question for a supervisor.
- A caller sees the invocations it started, or all of them with `workflows.view_invocation`.
- Cancelling and retrying ask the services' one rule,
  `user.has_perm("workflows.cancel_invocation", invocation)` (`retry_invocation`): the
  model permission, or having started the invocation.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ..models import Interrupt, Invocation
from ..policy import (
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    START_PERMISSION,
    control_refusal,
    may_answer,
)

CONTROL_PERMISSIONS = {"cancel": CANCEL_PERMISSION, "retry": RETRY_PERMISSION}


class CanStartInvocation(BasePermission):
    message = f"starting a workflow needs the permission {START_PERMISSION}"

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.user.has_perm(START_PERMISSION)


class CanAnswerInterrupt(BasePermission):
    """The answer rule for one interrupt: may this user answer it?"""

    message = "you may not answer this interrupt"

    def has_object_permission(self, request: Request, view: Any, obj: Interrupt) -> bool:
        return may_answer(request.user, obj)


class CanControlInvocation(BasePermission):
    """Cancel or retry (the view's action says which): the services' rule, whose refusal
    is the 403's detail."""

    message = "you may not do that to this invocation"

    def has_object_permission(self, request: Request, view: Any, obj: Invocation) -> bool:
        refused = control_refusal(request.user, CONTROL_PERMISSIONS[view.action], obj)
        if refused:
            self.message = refused
        return not refused
