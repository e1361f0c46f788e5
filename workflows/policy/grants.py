"""Who may make, see and revoke grants (remembered approvals of a gate)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from ..engine.questions import is_gate_question
from ..models import Grant
from .persons import holds, person_refusal

ADD_GRANT_PERMISSION = "workflows.add_grant"
CHANGE_GRANT_PERMISSION = "workflows.change_grant"
VIEW_GRANT_PERMISSION = "workflows.view_grant"


class GranterPolicy:
    """Who may make and revoke grants (remembered approvals of a gate).

    Remembering an approval for its invocation or its session is part of approving (the
    answer rule says who approves). Remembering it `always`, and making a grant apart from
    any decision, need the model permission `workflows.add_grant`. Revoking needs
    `workflows.change_grant`, or being the one who granted it."""

    def refusal_to_grant(self, user: Any, scope: str | None) -> str:
        """Why `user` may not make a grant of `scope` ("" when they may); `scope` None: a
        grant made apart from any decision."""
        refused = person_refusal(user)
        if refused or (scope is not None and scope != "always"):
            return refused
        if not holds(user, ADD_GRANT_PERMISSION):
            what = "remember an approval always" if scope else "make a grant"
            return f"{user.get_username()} lacks the permission {ADD_GRANT_PERMISSION} to {what}"
        return ""

    def refusal_to_revoke(self, user: Any, grant: Any) -> str:
        refused = person_refusal(user)
        if refused:
            return refused
        if grant.granted_by_id == user.pk or holds(user, CHANGE_GRANT_PERMISSION):
            return ""
        return (
            f"{user.get_username()} did not grant {grant.pk!r} and lacks the permission "
            f"{CHANGE_GRANT_PERMISSION} to revoke it"
        )

    def may_revoke(self, user: Any, grant: Any) -> bool:
        return not self.refusal_to_revoke(user, grant)


def grant_policy() -> GranterPolicy:
    return GranterPolicy()


def require_granter(actor: Any, interrupt_id: str, response: Any) -> None:
    """A person's answer to a gate's question that remembers the approval `always` needs
    `workflows.add_grant`: PermissionDenied otherwise, before anything is stored. The
    system (`actor` None) is not restricted."""
    if actor is None or not is_gate_question(interrupt_id) or not isinstance(response, dict):
        return
    scope = response.get("remember")
    if scope is None:
        return
    refusal = grant_policy().refusal_to_grant(actor, scope)
    if refusal:
        raise PermissionDenied(refusal)


def visible_grants(user: Any, queryset: QuerySet[Grant] | None = None) -> QuerySet[Grant]:
    """The grants `user` sees: all with `workflows.view_grant` (or `change_grant`), else
    the ones they granted."""
    queryset = Grant.objects.all() if queryset is None else queryset
    if user.has_perm(VIEW_GRANT_PERMISSION) or user.has_perm(CHANGE_GRANT_PERMISSION):
        return queryset
    return queryset.filter(granted_by=user.pk)
