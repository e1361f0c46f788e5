"""Who may answer an interrupt: one rule for the admin inbox, the API and the
e-mail links.

The rule lives in a policy class with two faces: `can_answer(user, interrupt)` for one
object and `answerable(user, queryset)`, its queryset counterpart, which scopes every list.
`HITL["ANSWER_POLICY"]` names the class in use (a subclass of `AssigneePolicy` is the
usual way to change it); `answer_policy()` returns an instance of it.

Everything asks `user.has_perm("workflows.answer_interrupt", interrupt)`, served by
`workflows.backends.AnswerPermissionBackend`, except that Django answers True to every
active superuser before any backend is asked. The write path (`services.decide`) therefore
calls the policy itself, so assignees and four-eyes bind superusers too.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from .conf import hitl_settings
from .expressions import HasAnyElement
from .models import Interrupt

ANSWER_PERMISSION = "workflows.answer_interrupt"
REASSIGN_PERMISSION = "workflows.reassign_interrupt"


def assignee_names(user: Any) -> list[str]:
    """The assignee strings that name `user`: "user:<username>" and one per group.
    Cached on the user object for its lifetime (a request), like Django's permissions."""
    if not hasattr(user, "_hitl_assignee_names"):
        groups = user.groups.values_list("name", flat=True)
        user._hitl_assignee_names = [
            f"user:{user.get_username()}",
            *(f"group:{name}" for name in groups),
        ]
    return user._hitl_assignee_names


class AssigneePolicy:
    """An active user who has the model permission `workflows.answer_interrupt` (or is a
    superuser) may answer an interrupt when it names no assignees or names them (directly
    or through a group), and, for a four-eyes interrupt, did not start its invocation."""

    def may_answer_any(self, user: Any) -> bool:
        """The model-level half of the rule: may this user answer interrupts at all?"""
        if not (user and user.is_authenticated and user.is_active):
            return False
        # Asking ModelBackend alone: `user.has_perm` would come back to this policy.
        return user.is_superuser or ANSWER_PERMISSION in user.get_all_permissions()

    def can_answer(self, user: Any, interrupt: Interrupt) -> bool:
        return not self.refusal(user, interrupt)

    def refusal(self, user: Any, interrupt: Interrupt) -> str:
        """Why `user` may not answer `interrupt` ("" when they may): the message of the
        PermissionDenied that services raise."""
        who = user.get_username() if user and user.is_authenticated else "an anonymous user"
        if not self.may_answer_any(user):
            return f"{who} lacks the permission {ANSWER_PERMISSION}"
        if interrupt.assignees and not set(assignee_names(user)) & set(interrupt.assignees):
            return f"{who} is not among the assignees ({', '.join(interrupt.assignees)})"
        if interrupt.four_eyes and interrupt.invocation.started_by_id == user.pk:
            return f"four eyes: {who} started the invocation and may not answer {interrupt.pk!r}"
        return ""

    def answerable(self, user: Any, queryset: QuerySet[Interrupt]) -> QuerySet[Interrupt]:
        """`queryset` narrowed to the interrupts `user` may answer (any status)."""
        if not self.may_answer_any(user):
            return queryset.none()
        assigned = Q(assignees=[]) | HasAnyElement("assignees", assignee_names(user))
        not_own = Q(four_eyes=False) | ~Q(invocation__started_by=user.pk)
        return queryset.filter(assigned, not_own)


def answer_policy() -> AssigneePolicy:
    """An instance of the policy `HITL["ANSWER_POLICY"]` names."""
    return hitl_settings.ANSWER_POLICY()


def can_reassign(user: Any, interrupt: Interrupt) -> bool:
    """Supervisors (`workflows.reassign_interrupt`) reassign anything; the people who may
    answer an interrupt may hand it over."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    return user.has_perm(REASSIGN_PERMISSION) or answer_policy().can_answer(user, interrupt)


ADD_GRANT_PERMISSION = "workflows.add_grant"
CHANGE_GRANT_PERMISSION = "workflows.change_grant"


class GranterPolicy:
    """Who may make and revoke grants (remembered approvals of a gate).

    Remembering an approval for its invocation or its session is part of approving (the
    answer rule says who approves). Remembering it `always`, and making a grant apart from
    any decision, need the model permission `workflows.add_grant`. Revoking needs
    `workflows.change_grant`, or being the one who granted it."""

    def refusal_to_grant(self, user: Any, scope: str | None) -> str:
        """Why `user` may not make a grant of `scope` ("" when they may); `scope` None: a
        grant made apart from any decision."""
        who = _who(user)
        if not _is_person(user):
            return f"{who} may grant nothing"
        if scope is not None and scope != "always":
            return ""
        if not user.has_perm(ADD_GRANT_PERMISSION):
            what = "remember an approval always" if scope else "make a grant"
            return f"{who} lacks the permission {ADD_GRANT_PERMISSION} to {what}"
        return ""

    def refusal_to_revoke(self, user: Any, grant: Any) -> str:
        who = _who(user)
        if not _is_person(user):
            return f"{who} may revoke nothing"
        if grant.granted_by_id == user.pk or user.has_perm(CHANGE_GRANT_PERMISSION):
            return ""
        return (
            f"{who} did not grant {grant.pk!r} and lacks the permission "
            f"{CHANGE_GRANT_PERMISSION} to revoke it"
        )

    def may_revoke(self, user: Any, grant: Any) -> bool:
        return not self.refusal_to_revoke(user, grant)


def _is_person(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def _who(user: Any) -> str:
    return user.get_username() if user and user.is_authenticated else "an anonymous user"


def grant_policy() -> GranterPolicy:
    return GranterPolicy()
