"""Who may do what to a question or an invocation: one rule each, asked the same way by
the admin, the API, the e-mail links and the services.

- Answering: a policy class with two faces, `can_answer(user, interrupt)` for one object
  and `answerable(user, queryset)`, its queryset counterpart, which scopes every list.
  `HITL["ANSWER_POLICY"]` names the class in use (a subclass of `AssigneePolicy` is the
  usual way to change it); `answer_policy()` returns an instance of it.
  Both honour active delegations (DESIGN 4.3): while one is active its delegate may answer
  what its delegator may, for questions assigned to the delegator, in its workflows.
- Cancelling and retrying an invocation: `InvocationControlPolicy`.
- Changing an answer already given: `rewind_refusal` (DESIGN 3.8).
- Delegating (out of office) and ending a delegation: `DelegationPolicy`.

Everything asks `user.has_perm("workflows.answer_interrupt", interrupt)` (or
`"workflows.cancel_invocation"` / `"workflows.retry_invocation"` with the invocation),
served by `workflows.backends.AnswerPermissionBackend`, except that Django answers True to
every active superuser before any backend is asked. The answer path (`services.decide`)
therefore calls the answer policy itself, so assignees and four-eyes bind superusers too.

Only `actor=None` is the system; every user object, the anonymous one included, is a
person, and an anonymous or inactive person may do nothing (`person_refusal`).

One module per concept (`persons`, `answers`, `invocations`, `grants`, `delegations`,
`rewinds`);
callers import from `workflows.policy` only.
"""

from ..principals import unreachable_quorum  # the number of voters, asked by the rules
from .answers import (
    ANSWER_PERMISSION,
    DASHBOARD_PERMISSIONS,
    REASSIGN_PERMISSION,
    AssigneePolicy,
    answer_policy,
    answerable_interrupts,
    can_reassign,
    may_answer,
    may_open_question,
    may_read_question,
    may_view_dashboard,
    reassign_refusal,
    releasable_interrupts,
    release_refusal,
    require_answerer,
    voting_for,
)
from .delegations import (
    ADD_DELEGATION_PERMISSION,
    CHANGE_DELEGATION_PERMISSION,
    VIEW_DELEGATION_PERMISSION,
    DelegationPolicy,
    delegation_policy,
)
from .grants import (
    ADD_GRANT_PERMISSION,
    CHANGE_GRANT_PERMISSION,
    VIEW_GRANT_PERMISSION,
    GranterPolicy,
    grant_policy,
    require_granter,
    visible_grants,
)
from .invocations import (
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    START_PERMISSION,
    VIEW_ALL_PERMISSION,
    InvocationControlPolicy,
    control_refusal,
    may_use_session,
    require_control,
    visible_invocations,
)
from .persons import person_refusal, require_person
from .rewinds import REWIND_PERMISSION, require_rewinder, rewind_refusal

__all__ = [
    "ADD_DELEGATION_PERMISSION",
    "ADD_GRANT_PERMISSION",
    "ANSWER_PERMISSION",
    "CANCEL_PERMISSION",
    "CHANGE_DELEGATION_PERMISSION",
    "CHANGE_GRANT_PERMISSION",
    "DASHBOARD_PERMISSIONS",
    "REASSIGN_PERMISSION",
    "RETRY_PERMISSION",
    "REWIND_PERMISSION",
    "START_PERMISSION",
    "VIEW_ALL_PERMISSION",
    "VIEW_DELEGATION_PERMISSION",
    "VIEW_GRANT_PERMISSION",
    "AssigneePolicy",
    "DelegationPolicy",
    "GranterPolicy",
    "InvocationControlPolicy",
    "answer_policy",
    "answerable_interrupts",
    "can_reassign",
    "control_refusal",
    "delegation_policy",
    "grant_policy",
    "may_answer",
    "may_open_question",
    "may_read_question",
    "may_use_session",
    "may_view_dashboard",
    "person_refusal",
    "reassign_refusal",
    "releasable_interrupts",
    "release_refusal",
    "require_answerer",
    "require_control",
    "require_granter",
    "require_person",
    "require_rewinder",
    "rewind_refusal",
    "unreachable_quorum",
    "visible_grants",
    "visible_invocations",
    "voting_for",
]
