"""A person's decision on a question (DESIGN 4.1): recorded under every rule the question
carries, and, once the decisions settle it (the first for quorum 1, the quorum's approvals
or the first rejection above), its answer accepted in the same transaction; and the
challenge a passkey signs for a signed decision. Each function takes its locks in the
project's one order (the invocation row, then the interrupt row, then the decisions), so
concurrent deciders queue instead of deadlocking."""

from __future__ import annotations

from typing import Any

from ..arguments import checked_decision
from ..audit import actions, trail
from ..engine.errors import UnknownInterruptError
from ..engine.events import FunctionResponse, approval_vote
from ..engine.quorum import combined_answer
from ..models import Decision, Interrupt
from ..policy import require_answerer, require_person
from ..signals import decision_recorded, send_on_commit
from ..transactions import store, write_transaction
from . import passkeys
from .answer_check import check_answer, checked_vote
from .answers import store_answers
from .claims import locked_interrupt, require_pending
from .grants import edit_of
from .rewinds import apply_rewind, is_reopened


def _node_name(interrupt: Interrupt) -> str:
    return interrupt.path.rsplit("/", 1)[-1].split("@", 1)[0]


def _decision_summary(decision: Decision) -> dict[str, Any]:
    return {
        "actor": decision.actor.get_username(),
        "approved": approval_vote(decision.response),
        "comment": decision.comment or decision.response.get("comment", ""),
        "at": decision.created_at.isoformat(),
    }


def _quorum_answer(interrupt: Interrupt, decisions: list[Decision]) -> Any:
    """The interrupt's answer once `decisions` settle it, else None: quorum 1 takes the
    decision as it is; above 1, the quorum-th approval or the first rejection answers,
    with every decision so far listed under `decisions`."""
    latest = decisions[-1]
    if interrupt.quorum == 1:
        return latest.response
    approvals = [d.response for d in decisions if approval_vote(d.response) is True]
    if approval_vote(latest.response) is False or len(approvals) >= interrupt.quorum:
        answer = {**latest.response, "decisions": [_decision_summary(d) for d in decisions]}
        return combined_answer(interrupt.pk, answer, approvals)
    return None


@write_transaction
def decide(
    interrupt_id: str,
    response: Any,
    *,
    actor: Any,
    comment: str = "",
    assertion: Any = None,
    action_fingerprint: str | None = None,
) -> Decision:
    """Record `actor`'s decision on a pending interrupt; once the quorum is met (or on the
    first rejection of a quorum vote), submit the interrupt's answer in the same
    transaction.

    `assertion`: the WebAuthn assertion (its JSON form) by which `actor`'s passkey signed
    `signing_challenge` of this decision. A question asked with `require_signature` needs
    one; when given, it must verify, and the decision's audit entry keeps it.

    `action_fingerprint`: for a gate's question, the fingerprint of the action the person
    decided on (`grants.action_fingerprint`, shown in the question's envelope); when given,
    the question must ask about that action (a channel that showed an earlier proposal is
    refused rather than approving another one).

    A delegate who may answer only through an active delegation decides for its delegator:
    `decision.on_behalf_of` (and the audit entry's) names them. One vote per person
    whichever hat they wear: their own when they have one, else one for a delegator whose
    vote is not cast yet.

    Every rule the question carries is applied by `answer_check.check_answer`, the one
    check every door passes. Raises PermissionDenied (the answer policy or a gate's
    grant rule refuses; passkeys.SignatureRefused for a missing or bad signature),
    AlreadyDecidedError (one decision per person),
    UnknownInterruptError, InterruptNotPendingError or ResponseValidationError; nothing is
    stored then. `decision.interrupt.status` tells whether it answered.
    """
    require_person(actor)
    value, comment = checked_decision(interrupt_id, response, comment)
    interrupt = locked_interrupt(interrupt_id)
    # This round's (DESIGN 3.8): a reopened question's earlier decisions are history.
    decisions = list(interrupt.decisions.filter(round=interrupt.round).select_related("actor"))
    admitted = check_answer(
        interrupt,
        actor,
        value,
        decisions=decisions,
        comment=comment,
        assertion=assertion,
        fingerprint=action_fingerprint,
    )
    value = admitted.response
    decision = Decision.objects.create(
        interrupt=interrupt,
        actor=actor,
        on_behalf_of=admitted.on_behalf_of,
        response=value,
        comment=comment,
        round=interrupt.round,
    )
    data = {"decision": decision.pk, "response": value, "comment": comment}
    edited = edit_of(interrupt, value)
    if edited is not None:  # an approval gate's args, changed before approving
        data["edit"] = edited
    signed = admitted.assertion
    trail.record(
        actions.DECISION_RECORDED,
        interrupt=interrupt,
        actor=actor,
        on_behalf_of=decision.on_behalf_of,
        data=data if signed is None else {**data, "assertion": signed},
    )
    decisions.append(decision)
    answer = _quorum_answer(interrupt, decisions)
    if answer is not None and is_reopened(interrupt):
        # A new round settled: its answer replaces the earlier round's (DESIGN 3.8).
        apply_rewind(
            interrupt.pk, answer, actor, by_decisions=True, on_behalf_of=decision.on_behalf_of
        )
        interrupt.refresh_from_db()
    elif answer is not None:
        # The decider passed the rule above; a quorum's answer is this service's to give.
        db = store()
        answered = [FunctionResponse(interrupt.pk, _node_name(interrupt), answer)]
        locked = db.lock_for_answers_sync([interrupt.pk])
        stand_ins = {interrupt.pk: decision.on_behalf_of} if decision.on_behalf_of else {}
        store_answers(db, answered, locked, actor, stand_ins)
        interrupt.refresh_from_db()
    send_on_commit(
        decision_recorded, sender=Decision, decision_id=decision.pk, interrupt_id=interrupt.pk
    )
    return decision


def signing_challenge(interrupt_id: str, response: Any, *, actor: Any, comment: str = "") -> bytes:
    """The challenge `actor`'s passkey signs to decide `response` with `comment` on a
    pending interrupt, checked as `decide` checks it (who may answer, the schema); only
    its server nonce is stored (single-use, expiring). See workflows.audit.assertions for
    how it is derived."""
    require_person(actor)
    value, comment = checked_decision(interrupt_id, response, comment)
    interrupt = Interrupt.objects.select_related("invocation").filter(pk=interrupt_id).first()
    if interrupt is None:
        raise UnknownInterruptError(interrupt_id)
    require_answerer(actor, interrupt)
    require_pending(interrupt)
    return passkeys.issue_challenge(actor, interrupt, checked_vote(interrupt, value), comment)
