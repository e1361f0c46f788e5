"""Who may do what to a question or an invocation: one rule each, asked the same way by
the admin, the API, the e-mail links and the services.

- Answering: a policy class with two faces, `can_answer(user, interrupt)` for one object
  and `answerable(user, queryset)`, its queryset counterpart, which scopes every list.
  `HITL["ANSWER_POLICY"]` names the class in use (a subclass of `AssigneePolicy` is the
  usual way to change it); `answer_policy()` returns an instance of it.
- Cancelling and retrying an invocation: `InvocationControlPolicy`.

Everything asks `user.has_perm("workflows.answer_interrupt", interrupt)` (or
`"workflows.cancel_invocation"` / `"workflows.retry_invocation"` with the invocation),
served by `workflows.backends.AnswerPermissionBackend`, except that Django answers True to
every active superuser before any backend is asked. The answer path (`services.decide`)
therefore calls the answer policy itself, so assignees and four-eyes bind superusers too.

Only `actor=None` is the system; every user object, the anonymous one included, is a
person, and an anonymous or inactive person may do nothing (`person_refusal`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from .conf import hitl_settings
from .engine.principals import parse_assignee
from .expressions import HasAnyElement
from .models import Interrupt, Invocation

ANSWER_PERMISSION = "workflows.answer_interrupt"
REASSIGN_PERMISSION = "workflows.reassign_interrupt"
CANCEL_PERMISSION = "workflows.cancel_invocation"
RETRY_PERMISSION = "workflows.retry_invocation"


def person_refusal(user: Any) -> str:
    """Why `user` may change nothing at all ("" for an active, signed-in user)."""
    if not getattr(user, "is_authenticated", False):
        return "an anonymous user may change nothing: sign in first"
    if not user.is_active:
        return f"{user.get_username()} is inactive and may change nothing"
    return ""


def require_person(actor: Any) -> None:
    """Only None is the system; any user object is a person, and an anonymous or inactive
    one may change nothing: PermissionDenied (the services ask before looking anything up)."""
    refused = "" if actor is None else person_refusal(actor)
    if refused:
        raise PermissionDenied(refused)


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
        return not person_refusal(user) and _holds(user, ANSWER_PERMISSION)

    def can_answer(self, user: Any, interrupt: Interrupt) -> bool:
        return not self.refusal(user, interrupt)

    def refusal(self, user: Any, interrupt: Interrupt) -> str:
        """Why `user` may not answer `interrupt` ("" when they may): the message of the
        PermissionDenied that services raise."""
        refused = person_refusal(user)
        if refused:
            return refused
        who = user.get_username()
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


def _holds(user: Any, permission: str) -> bool:
    """The model permission, asking ModelBackend alone (`user.has_perm` with an object
    would come back to these policies)."""
    return user.is_superuser or permission in user.get_all_permissions()


def answer_policy() -> AssigneePolicy:
    """An instance of the policy `HITL["ANSWER_POLICY"]` names."""
    return hitl_settings.ANSWER_POLICY()


def can_reassign(user: Any, interrupt: Interrupt) -> bool:
    """Supervisors (`workflows.reassign_interrupt`) reassign anything; the people who may
    answer an interrupt may hand it over."""
    if person_refusal(user):
        return False
    return user.has_perm(REASSIGN_PERMISSION) or answer_policy().can_answer(user, interrupt)


def unreachable_quorum(
    assignees: list[str], quorum: int, *, approvals: int = 0, excluded: Iterable[Any] = ()
) -> str:
    """Why `quorum` approvals cannot be reached ("" when they can): the `approvals` given
    so far plus one per distinct active user the assignees name, directly or through a
    group, leaving out `excluded` user ids (who may not vote: the starter of a four-eyes
    question, those who decided already)."""
    if quorum <= 1 or not assignees:
        return ""
    named: dict[str, list[str]] = {"user": [], "group": []}
    for kind, name in map(parse_assignee, assignees):
        named[kind].append(name)
    users = get_user_model()
    voters = (
        users.objects.filter(is_active=True)
        .filter(
            Q(**{f"{users.USERNAME_FIELD}__in": named["user"]}) | Q(groups__name__in=named["group"])
        )
        .exclude(pk__in=[pk for pk in excluded if pk is not None])
        .distinct()
        .count()
    )
    if approvals + voters >= quorum:
        return ""
    so_far = f"{approvals} approval(s) so far and " if approvals else ""
    return (
        f"quorum {quorum} cannot be met: {so_far}{voters} active user(s) among "
        f"{', '.join(assignees)} who may still approve"
    )


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
        if _holds(user, permission) or invocation.started_by_id == user.pk:
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
        refused = person_refusal(user)
        if refused or (scope is not None and scope != "always"):
            return refused
        if not _holds(user, ADD_GRANT_PERMISSION):
            what = "remember an approval always" if scope else "make a grant"
            return f"{user.get_username()} lacks the permission {ADD_GRANT_PERMISSION} to {what}"
        return ""

    def refusal_to_revoke(self, user: Any, grant: Any) -> str:
        refused = person_refusal(user)
        if refused:
            return refused
        if grant.granted_by_id == user.pk or _holds(user, CHANGE_GRANT_PERMISSION):
            return ""
        return (
            f"{user.get_username()} did not grant {grant.pk!r} and lacks the permission "
            f"{CHANGE_GRANT_PERMISSION} to revoke it"
        )

    def may_revoke(self, user: Any, grant: Any) -> bool:
        return not self.refusal_to_revoke(user, grant)


def grant_policy() -> GranterPolicy:
    return GranterPolicy()
