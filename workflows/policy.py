"""Who may do what to a question or an invocation: one rule each, asked the same way by
the admin, the API, the e-mail links and the services.

- Answering: a policy class with two faces, `can_answer(user, interrupt)` for one object
  and `answerable(user, queryset)`, its queryset counterpart, which scopes every list.
  `HITL["ANSWER_POLICY"]` names the class in use (a subclass of `AssigneePolicy` is the
  usual way to change it); `answer_policy()` returns an instance of it.
  Both honour active delegations (DESIGN 4.3): while one is active its delegate may answer
  what its delegator may, for questions assigned to the delegator, in its workflows.
- Cancelling and retrying an invocation: `InvocationControlPolicy`.
- Delegating (out of office) and ending a delegation: `DelegationPolicy`.

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

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from .conf import hitl_settings
from .engine.errors import AlreadyDecidedError
from .expressions import HasAnyElement
from .models import Delegation, Interrupt, Invocation
from .principals import active_users_named, assignee_names, delegations_to

ANSWER_PERMISSION = "workflows.answer_interrupt"
REASSIGN_PERMISSION = "workflows.reassign_interrupt"
CANCEL_PERMISSION = "workflows.cancel_invocation"
RETRY_PERMISSION = "workflows.retry_invocation"
REWIND_PERMISSION = "workflows.rewind_interrupt"


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


def _covers(delegation: Delegation, workflow_name: str) -> bool:
    return not delegation.workflows or workflow_name in delegation.workflows


def _in_workflows(delegation: Delegation) -> Q:
    return Q(workflow_name__in=delegation.workflows) if delegation.workflows else Q()


class AssigneePolicy:
    """An active user who has the model permission `workflows.answer_interrupt` (or is a
    superuser) may answer an interrupt when it names no assignees or names them (directly
    or through a group), or names someone they stand in for (an active delegation to them
    from a user who may answer it, covering its workflow); and, for a four-eyes interrupt,
    when they neither started its invocation nor stand in for whoever did.

    Delegations do not chain: a delegate answers with their delegator's own right, not
    with rights the delegator holds as someone else's delegate."""

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
        if not self.in_own_right(user, interrupt) and not self.stand_ins(user, interrupt):
            return (
                f"{who} is not among the assignees ({', '.join(interrupt.assignees)}) "
                "and stands in for none of them"
            )
        if interrupt.four_eyes:
            return self._four_eyes_refusal(user, interrupt)
        return ""

    def in_own_right(self, user: Any, interrupt: Interrupt) -> bool:
        """Whether the assignees let `user` answer as themselves (none named, or `user`
        named directly or by group); the permission and four-eyes are the rest of the rule."""
        return not interrupt.assignees or bool(set(assignee_names(user)) & set(interrupt.assignees))

    def stand_ins(self, user: Any, interrupt: Interrupt) -> list[Delegation]:
        """The active delegations through which `user` may answer `interrupt` for someone
        else (their `delegator` loaded), in the order they began; [] for a question with no
        assignees, which needs none."""
        if not interrupt.assignees:
            return []
        return [
            delegation
            for delegation in delegations_to(user)
            if _covers(delegation, interrupt.workflow_name)
            and self.may_answer_any(delegation.delegator)
            and self.in_own_right(delegation.delegator, interrupt)
        ]

    def standing_in(
        self, user: Any, interrupt: Interrupt, voted: Iterable[Any] = ()
    ) -> Delegation | None:
        """Whose vote `user`, who may answer `interrupt`, casts on it: None for their own
        (which comes first when they have one), else the delegation through which they vote
        for its delegator. `voted`: the user ids whose vote is cast already (the deciders
        and those they stood in for). One vote per person whichever hat they wear: raises
        AlreadyDecidedError when every vote open to `user` is cast."""
        voted = set(voted)
        if user.pk in voted:
            raise AlreadyDecidedError(interrupt.pk, user.get_username())
        if self.in_own_right(user, interrupt):
            return None
        stand_ins = self.stand_ins(user, interrupt)
        for delegation in stand_ins:
            if delegation.delegator_id not in voted:
                return delegation
        names = ", ".join(sorted({d.delegator.get_username() for d in stand_ins}))
        raise AlreadyDecidedError(interrupt.pk, names or user.get_username())

    def _four_eyes_refusal(self, user: Any, interrupt: Interrupt) -> str:
        starter = interrupt.invocation.started_by_id
        who = user.get_username()
        if starter is not None and starter == user.pk:
            return f"four eyes: {who} started the invocation and may not answer {interrupt.pk!r}"
        for delegation in delegations_to(user):
            if delegation.delegator_id == starter and _covers(delegation, interrupt.workflow_name):
                return (
                    f"four eyes: {who} stands in for {delegation.delegator.get_username()}, "
                    f"who started the invocation, and may not answer {interrupt.pk!r}"
                )
        return ""

    def answerable(self, user: Any, queryset: QuerySet[Interrupt]) -> QuerySet[Interrupt]:
        """`queryset` narrowed to the interrupts `user` may answer (any status)."""
        if not self.may_answer_any(user):
            return queryset.none()
        delegations = delegations_to(user)
        own = Q(assignees=[]) | HasAnyElement("assignees", assignee_names(user))
        return queryset.filter(own | self._delegated(delegations), self._not_own(user, delegations))

    def answerable_by_delegation(
        self, user: Any, queryset: QuerySet[Interrupt]
    ) -> QuerySet[Interrupt]:
        """`queryset` narrowed to the interrupts `user` may answer only through an active
        delegation (not in their own right): the "delegated to me" view."""
        delegations = delegations_to(user)
        if not self.may_answer_any(user) or not any(
            self.may_answer_any(d.delegator) for d in delegations
        ):
            # No one to stand in for: an empty list, not a walk of every pending question
            # that keeps none (2 s at 1,000,000, and the admin index counts it each visit).
            return queryset.none()
        own = Q(assignees=[]) | HasAnyElement("assignees", assignee_names(user))
        # `answerable`'s rule with "own or delegated" and "not own" reduced to "delegated":
        # the planner then sees how few questions that is (one delegator's, not a quarter
        # of the table) and reads them through the assignees index for a count.
        return queryset.filter(self._delegated(delegations), ~own, self._not_own(user, delegations))

    def _delegated(self, delegations: list[Delegation]) -> Q:
        """The questions assigned to someone these delegations let their delegate stand in
        for, in the delegations' workflows."""
        reach = Q(pk__in=[])
        for delegation in delegations:
            delegator = delegation.delegator
            if self.may_answer_any(delegator):
                named = HasAnyElement("assignees", assignee_names(delegator))
                reach |= Q(named) & _in_workflows(delegation)
        return reach

    def _not_own(self, user: Any, delegations: list[Delegation]) -> Q:
        """Four-eyes: not a question of an invocation `user` started, nor of one started by
        someone they stand in for (in that delegation's workflows)."""
        excluded = Q(invocation__started_by=user.pk)
        for delegation in delegations:
            excluded |= Q(invocation__started_by=delegation.delegator_id) & _in_workflows(
                delegation
            )
        return Q(four_eyes=False) | ~excluded


def voting_for(user: Any, interrupt: Interrupt, voted: Iterable[Any] = ()) -> Delegation | None:
    """The delegation through which `user`, who may answer `interrupt`, casts their vote
    (None: their own), as the answer policy says (`AssigneePolicy.standing_in`); a
    replacement policy that knows nothing of delegations: their own."""
    standing_in = getattr(answer_policy(), "standing_in", None)
    return None if standing_in is None else standing_in(user, interrupt, voted)


def _holds(user: Any, permission: str) -> bool:
    """The model permission, asking ModelBackend alone (`user.has_perm` with an object
    would come back to these policies)."""
    return user.is_superuser or permission in user.get_all_permissions()


def answer_policy() -> AssigneePolicy:
    """An instance of the policy `HITL["ANSWER_POLICY"]` names."""
    return hitl_settings.ANSWER_POLICY()


def reassign_refusal(user: Any, interrupt: Interrupt) -> str:
    """Why `user` may not reassign `interrupt` ("" when they may). Supervisors
    (`workflows.reassign_interrupt`) reassign anything; the people who may answer it in
    their own right may hand it over. A delegate answers for their delegator but never
    hands the delegator's question over (to themselves or anyone): it would outlive the
    delegation, leaving the delegator unable to answer it or take it back."""
    refused = person_refusal(user)
    if refused or user.has_perm(REASSIGN_PERMISSION):
        return refused
    policy = answer_policy()
    who = user.get_username()
    if not policy.can_answer(user, interrupt):
        return f"{who} may not reassign interrupt {interrupt.pk!r}"
    if isinstance(policy, AssigneePolicy) and not policy.in_own_right(user, interrupt):
        names = sorted({d.delegator.get_username() for d in policy.stand_ins(user, interrupt)})
        return (
            f"{who} stands in for {', '.join(names)} on interrupt {interrupt.pk!r}: a "
            "delegate may answer it, not hand it over; the assignees or a supervisor may"
        )
    return ""


def rewind_refusal(user: Any, interrupt: Interrupt) -> str:
    """Why `user` may not change the answer to `interrupt` ("" when they may): the model
    permission `workflows.rewind_interrupt`, and the answer rule for the new answer
    (assignees, delegation, four-eyes: DESIGN 3.8)."""
    refused = person_refusal(user)
    if refused:
        return refused
    if not _holds(user, REWIND_PERMISSION):
        return f"{user.get_username()} lacks the permission {REWIND_PERMISSION}"
    return answer_policy().refusal(user, interrupt)


def require_rewinder(actor: Any, interrupt: Interrupt) -> None:
    """PermissionDenied unless `actor` (None: the system) may change its answer."""
    if actor is not None:
        refusal = rewind_refusal(actor, interrupt)
        if refusal:
            raise PermissionDenied(refusal)


def can_reassign(user: Any, interrupt: Interrupt) -> bool:
    return not reassign_refusal(user, interrupt)


def may_open_question(user: Any, interrupt: Interrupt) -> bool:
    """Whether `user` may open the decision page of `interrupt` (and so its live feed):
    they may answer it or hand it over."""
    return answer_policy().can_answer(user, interrupt) or can_reassign(user, interrupt)


def unreachable_quorum(
    assignees: list[str], quorum: int, *, approvals: int = 0, excluded: Iterable[Any] = ()
) -> str:
    """Why `quorum` approvals cannot be reached ("" when they can): the `approvals` given
    so far plus one per distinct active user the assignees name, directly or through a
    group, leaving out `excluded` user ids (who may not vote: the starter of a four-eyes
    question, those who decided already)."""
    if quorum <= 1 or not assignees:
        return ""
    voters = active_users_named(assignees, excluded=excluded)
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


ADD_DELEGATION_PERMISSION = "workflows.add_delegation"
CHANGE_DELEGATION_PERMISSION = "workflows.change_delegation"
VIEW_DELEGATION_PERMISSION = "workflows.view_delegation"


class DelegationPolicy:
    """Who may delegate whose work, and end a delegation (out of office, DESIGN 4.3).

    A person may delegate their own work; staff with `workflows.add_delegation` may
    delegate anyone's. A delegation may be ended by its delegator, by whoever made it, and
    by holders of `workflows.change_delegation`. The system (None) may do both."""

    def refusal_to_delegate(self, user: Any, delegator: Any) -> str:
        """Why `user` may not delegate `delegator`'s work ("" when they may)."""
        if user is None:
            return ""
        refused = person_refusal(user)
        if refused or delegator.pk == user.pk:
            return refused
        if user.is_staff and _holds(user, ADD_DELEGATION_PERMISSION):
            return ""
        return (
            f"{user.get_username()} may delegate only their own work: delegating "
            f"{delegator.get_username()}'s takes staff status and the permission "
            f"{ADD_DELEGATION_PERMISSION}"
        )

    def refusal_to_end(self, user: Any, delegation: Delegation) -> str:
        """Why `user` may not end `delegation` ("" when they may)."""
        if user is None:
            return ""
        refused = person_refusal(user)
        if refused or user.pk in (delegation.delegator_id, delegation.created_by_id):
            return refused
        if _holds(user, CHANGE_DELEGATION_PERMISSION):
            return ""
        return (
            f"{user.get_username()} neither gave nor made delegation {delegation.pk} and "
            f"lacks the permission {CHANGE_DELEGATION_PERMISSION} to end it"
        )

    def visible(self, user: Any, queryset: QuerySet[Delegation]) -> QuerySet[Delegation]:
        """`queryset` narrowed to the delegations `user` sees: all with a delegation model
        permission, else those they gave, received or made."""
        if person_refusal(user):
            return queryset.none()
        permissions = (
            VIEW_DELEGATION_PERMISSION,
            ADD_DELEGATION_PERMISSION,
            CHANGE_DELEGATION_PERMISSION,
        )
        if any(_holds(user, permission) for permission in permissions):
            return queryset
        return queryset.filter(Q(delegator=user.pk) | Q(delegate=user.pk) | Q(created_by=user.pk))


def delegation_policy() -> DelegationPolicy:
    return DelegationPolicy()


def may_use_session(user: Any, session: Any) -> bool:
    """Whether `user` may read and continue a session (an agent protocol's thread): the
    person who opened it, or whoever may see every invocation."""
    if person_refusal(user):
        return False
    return session.created_by_id == user.pk or user.has_perm("workflows.view_invocation")


START_PERMISSION = "workflows.add_invocation"
VIEW_ALL_PERMISSION = "workflows.view_invocation"


def visible_invocations(user: Any, queryset: QuerySet[Invocation]) -> QuerySet[Invocation]:
    """The invocations `user` may see (the API's list, a stream, a protocol's task): all
    with `workflows.view_invocation`, else those they started."""
    if user.pk is None:  # nobody signed in: not the invocations the system started
        return queryset.none()
    if user.has_perm(VIEW_ALL_PERMISSION):
        return queryset
    return queryset.filter(started_by=user.pk)
