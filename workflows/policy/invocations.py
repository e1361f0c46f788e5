"""Who may start, see, cancel and retry an invocation, and continue a session."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from ..models import Invocation
from .persons import holds, person_refusal

CANCEL_PERMISSION = "workflows.cancel_invocation"
RETRY_PERMISSION = "workflows.retry_invocation"
START_PERMISSION = "workflows.add_invocation"
VIEW_ALL_PERMISSION = "workflows.view_invocation"


class InvocationControlPolicy:
    """An active user may cancel (retry) an invocation when they hold the model permission
    `workflows.cancel_invocation` (`workflows.retry_invocation`), are a superuser, or
    started the invocation."""

    permissions = (CANCEL_PERMISSION, RETRY_PERMISSION)

    def may_control(self, user: Any, permission: str, invocation: Invocation) -> bool:
        return not self.refusal(user, permission, invocation)

    def refusal(self, user: Any, permission: str, invocation: Invocation) -> str:
        """Why `user` may not do what `permission` allows to `invocation` ("" when they
        may)."""
        refused = person_refusal(user)
        if refused:
            return refused
        if holds(user, permission) or invocation.started_by_id == user.pk:
            return ""
        return (
            f"{user.get_username()} did not start invocation {invocation.pk} and lacks "
            f"the permission {permission}"
        )


def require_control(actor: Any, permission: str, invocation: Invocation | Any) -> None:
    """PermissionDenied unless `actor` may cancel or retry `invocation` (the model or its
    id; `permission` says which). None, the system, always may."""
    if actor is None:
        return
    if not isinstance(invocation, Invocation):
        invocation = Invocation.objects.get(pk=invocation)
    refused = control_refusal(actor, permission, invocation)
    if refused:
        raise PermissionDenied(refused)


def control_refusal(user: Any, permission: str, invocation: Invocation) -> str:
    """Why `user` may not cancel or retry `invocation` (`permission` says which; "" when
    they may), asked the Django way: `user.has_perm(permission, invocation)`."""
    if user.has_perm(permission, invocation):
        return ""
    return InvocationControlPolicy().refusal(user, permission, invocation) or (
        f"{user.get_username()} may not: has_perm({permission!r}, invocation) is False "
        f"(the system check workflows.E101 says why)"
    )


def may_use_session(user: Any, session: Any) -> bool:
    """Whether `user` may read and continue a session (an agent protocol's thread): the
    person who opened it, or whoever may see every invocation."""
    if person_refusal(user):
        return False
    return session.created_by_id == user.pk or user.has_perm("workflows.view_invocation")


def visible_invocations(user: Any, queryset: QuerySet[Invocation]) -> QuerySet[Invocation]:
    """The invocations `user` may see (the API's list, a stream, a protocol's task): all
    with `workflows.view_invocation`, else those they started."""
    if user.pk is None:  # nobody signed in: not the invocations the system started
        return queryset.none()
    if user.has_perm(VIEW_ALL_PERMISSION):
        return queryset
    return queryset.filter(started_by=user.pk)
