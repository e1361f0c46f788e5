"""Who may do what through the API.

- Starting an invocation needs the model permission `workflows.add_invocation`.
- Answering, deciding, claiming and releasing ask the answer rule the Django way,
  `user.has_perm("workflows.answer_interrupt", interrupt)`; lists of interrupts are scoped
  with the rule's queryset counterpart (`answer_policy().answerable`).
- A caller sees the invocations it started, or all of them with `workflows.view_invocation`;
  it cancels or retries the ones it started, or any with `workflows.change_invocation`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ..models import Interrupt, Invocation
from ..policy import ANSWER_PERMISSION, answer_policy

START_PERMISSION = "workflows.add_invocation"
VIEW_ALL_PERMISSION = "workflows.view_invocation"
MANAGE_ALL_PERMISSION = "workflows.change_invocation"


def visible_invocations(user: Any, queryset: QuerySet[Invocation]) -> QuerySet[Invocation]:
    if user.has_perm(VIEW_ALL_PERMISSION):
        return queryset
    return queryset.filter(started_by=user.pk)


def answerable_interrupts(user: Any, queryset: QuerySet[Interrupt]) -> QuerySet[Interrupt]:
    return answer_policy().answerable(user, queryset)


def may_answer(user: Any, interrupt: Interrupt) -> bool:
    return user.has_perm(ANSWER_PERMISSION, interrupt)


class CanStartInvocation(BasePermission):
    message = f"starting a workflow needs the permission {START_PERMISSION}"

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.user.has_perm(START_PERMISSION)


class CanAnswerInterrupt(BasePermission):
    """The answer rule for one interrupt: may this user answer it?"""

    message = "you may not answer this interrupt"

    def has_object_permission(self, request: Request, view: Any, obj: Interrupt) -> bool:
        return may_answer(request.user, obj)


class CanManageInvocation(BasePermission):
    message = f"only who started it, or a user with {MANAGE_ALL_PERMISSION}, may do that"

    def has_object_permission(self, request: Request, view: Any, obj: Invocation) -> bool:
        user = request.user
        return obj.started_by_id == user.pk or user.has_perm(MANAGE_ALL_PERMISSION)
