"""Who may answer a question, hand it over or open it: `AssigneePolicy` (the class
`HITL["ANSWER_POLICY"]` names; `answer_policy()` returns an instance), its queryset face
that scopes every list, delegations honoured (DESIGN 4.3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from ..conf import hitl_settings
from ..engine.errors import AlreadyDecidedError
from ..expressions import HasAnyElement
from ..models import Delegation, Interrupt
from ..principals import assignee_names, delegations_to
from .persons import holds, person_refusal

ANSWER_PERMISSION = "workflows.answer_interrupt"
REASSIGN_PERMISSION = "workflows.reassign_interrupt"


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
        return not person_refusal(user) and holds(user, ANSWER_PERMISSION)

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


def can_reassign(user: Any, interrupt: Interrupt) -> bool:
    return not reassign_refusal(user, interrupt)


def may_open_question(user: Any, interrupt: Interrupt) -> bool:
    """Whether `user` may open the decision page of `interrupt` (and so its live feed):
    they may answer it or hand it over."""
    return answer_policy().can_answer(user, interrupt) or can_reassign(user, interrupt)


def require_answerer(actor: Any, interrupt: Interrupt) -> None:
    """PermissionDenied unless the answer policy lets `actor` answer `interrupt`."""
    policy = answer_policy()
    if not policy.can_answer(actor, interrupt):
        raise PermissionDenied(policy.refusal(actor, interrupt))


def answerable_interrupts(user: Any, queryset: QuerySet[Interrupt]) -> QuerySet[Interrupt]:
    return answer_policy().answerable(user, queryset)


def releasable_interrupts(user: Any, queryset: QuerySet[Interrupt]) -> QuerySet[Interrupt]:
    """The interrupts `user` sees to release: all for a supervisor, else those they may
    answer or have claimed (services.release says whether they may)."""
    if user.has_perm(REASSIGN_PERMISSION):
        return queryset
    return queryset.filter(
        Q(pk__in=answerable_interrupts(user, queryset).values("pk")) | Q(claimed_by=user.pk)
    )


def release_refusal(user: Any, interrupt: Interrupt) -> str:
    """Why `user` may not drop the claim on `interrupt` ("" when they may): its claimer
    may, and so may a supervisor (`workflows.reassign_interrupt`)."""
    claimer = interrupt.claimed_by
    if claimer is None or claimer.pk == user.pk or user.has_perm(REASSIGN_PERMISSION):
        return ""
    return (
        f"interrupt {interrupt.pk!r} is claimed by {claimer.get_username()}; only they or a "
        "supervisor may release it"
    )


def may_read_question(user: Any, interrupt: Interrupt) -> bool:
    """Whether a question's message and payload are for `user`: the inbox's rule, the
    answer policy itself (which binds a superuser to the assignees as well)."""
    return answer_policy().can_answer(user, interrupt)


DASHBOARD_PERMISSIONS = ("workflows.view_interrupt", "workflows.view_decision")


def may_view_dashboard(user: Any) -> bool:
    """Whether `user` may see the approvals dashboard (every question's figures)."""
    return user.is_active and user.is_staff and user.has_perms(DASHBOARD_PERMISSIONS)


def may_answer(user: Any, interrupt: Interrupt) -> bool:
    """The answer rule asked the Django way (a superuser may answer anything)."""
    return user.has_perm(ANSWER_PERMISSION, interrupt)
