"""Every rule a question carries, checked in one place that every door passes through
(DESIGN 4.1): `check_answer`.

The doors: `services.decide` (the admin's decision page and bulk approve, the e-mail and
Slack links, `POST interrupts/{id}/decisions/`) and `services.submit_function_responses`
(`POST function-responses/`); a protocol adapter calls one of the two. Each calls
`check_answer` with the question locked, before it stores anything, so a rule added here
binds every door at once; none of them asks a rule of its own (a page may ask the policy
beforehand to say why it shows no form, never instead).

The rules, in the order they are asked (the first that fails is the refusal):
1. who: the answer policy (assignees, delegation, four-eyes; `policy.AssigneePolicy`);
2. how: a question with `quorum > 1` takes decisions only (`decision_required`);
3. one vote per person, whichever hat they wear (`already_decided`);
4. a decision needs a pending question and an answer its schema and quorum accept;
5. a gate's action and grant request: an answer that names the action it approves (its
   fingerprint) answers only a gate asking about that action, a grant asked for can be
   kept (`grants.check_grant_answer`), and remembering `always` needs
   `workflows.add_grant`;
6. `require_signature`: a person's answer carries a valid assertion of their passkey over
   the decision's challenge (`signature_required`, `invalid_signature`; both 403). A direct
   answer cannot carry one: a person answers a signed question by a decision.
A direct answer is asked 1, 2, 6 and 5 (the engine checks that it is pending and valid, and
takes an identical repeat of an accepted answer as a success).

The system (`actor` None, on the direct path) is bound by none of them but a gate's grant
request that could not be kept; the engine checks the answer's own validity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied

from ..engine.errors import AlreadyDecidedError, DecisionRequiredError, ResponseValidationError
from ..engine.events import approval_vote
from ..engine.quorum import vote_problem
from ..engine.schema import validate_response
from ..models import Decision, Interrupt
from ..policy import answer_policy, require_granter, voting_for
from . import passkeys
from .claims import require_pending
from .grants import check_fingerprint, check_grant_answer


@dataclass(frozen=True)
class Admission:
    """What the check found for an answer it lets through: the answer as it is stored,
    whom the actor stands in for (None: themselves or the system) and the verified
    assertion as the audit entry keeps it (None when unsigned)."""

    response: Any
    on_behalf_of: Any = None
    assertion: dict[str, str] | None = None


def check_answer(
    interrupt: Interrupt,
    actor: Any,
    response: Any,
    *,
    decisions: Sequence[Decision] | None = None,
    comment: str = "",
    assertion: Any = None,
    fingerprint: str | None = None,
) -> Admission:
    """Apply every rule `interrupt` carries to `actor`'s answer `response`; raise the
    first refusal (PermissionDenied or its subclass passkeys.SignatureRefused, or a named
    WorkflowError), else return the Admission.

    `decisions`: for a decision, those recorded on the question so far; None for a direct
    answer (submit_function_responses), which the system (`actor` None) may give.
    `response`: the answer as it will be stored (unwrapped and size-checked).
    `comment` and `assertion`: a decision's, which the signature covers.
    `fingerprint`: the gate's action the answer was given for (the envelope's
    `action_fingerprint`), when the door carries it: refused if the question asks about
    another action."""
    direct = decisions is None
    check_fingerprint(interrupt.pk, interrupt.payload, fingerprint)
    if direct and actor is None:
        check_grant_answer(interrupt.pk, response)
        return Admission(response)
    policy = answer_policy()
    refusal = policy.refusal(actor, interrupt)
    if refusal:
        raise PermissionDenied(refusal)
    if direct:
        return _direct(interrupt, actor, response)
    assert decisions is not None
    if any(d.actor_id == actor.pk for d in decisions):
        raise AlreadyDecidedError(interrupt.pk, actor.get_username())
    voted = [pk for d in decisions for pk in (d.actor_id, d.on_behalf_of_id) if pk is not None]
    stand_in = voting_for(actor, interrupt, voted)
    require_pending(interrupt)
    value = checked_vote(interrupt, response, decisions)
    require_granter(actor, interrupt.pk, value)
    signed = None
    if interrupt.require_signature or assertion is not None:
        signed = passkeys.verified_assertion(interrupt, actor, value, comment, assertion)
    return Admission(value, None if stand_in is None else stand_in.delegator, signed)


def _direct(interrupt: Interrupt, actor: Any, response: Any) -> Admission:
    """A person's direct answer, once the answer policy lets them answer."""
    if interrupt.quorum > 1:
        raise DecisionRequiredError(interrupt.pk, interrupt.quorum)
    if interrupt.require_signature:
        raise passkeys.SignatureRefused(
            f"interrupt {interrupt.pk!r} needs your passkey's signature: record a decision "
            f"with its assertion (POST interrupts/{interrupt.pk}/decisions/, or its page), "
            "not a direct answer",
            code="signature_required",
        )
    stand_in = voting_for(actor, interrupt)
    check_grant_answer(interrupt.pk, response)
    require_granter(actor, interrupt.pk, response)
    return Admission(response, None if stand_in is None else stand_in.delegator)


def checked_vote(interrupt: Interrupt, value: Any, earlier: Sequence[Decision] = ()) -> Any:
    """A decision's answer if valid for its question (its schema, a gate's grant request;
    above quorum 1, an approval or a rejection without the `decisions` the service adds,
    agreeing with the `earlier` votes where they must); else the error."""
    validate_response(interrupt.pk, interrupt.response_schema, value)
    check_grant_answer(interrupt.pk, value)
    if interrupt.quorum == 1:
        return value
    problem = vote_problem(interrupt.pk, [d.response for d in earlier], value)
    if problem is not None:
        raise ResponseValidationError(interrupt.pk, *problem)
    if approval_vote(value) is None:
        raise ResponseValidationError(
            interrupt.pk, "approved", "a quorum decision must approve or reject (true or false)"
        )
    if "decisions" in value:
        raise ResponseValidationError(
            interrupt.pk, "decisions", "is added by the approval service; leave it out"
        )
    return value
