"""The one write path, from the request side: start, submit_function_responses, cancel,
retry, and the people's decisions and claims. Each change is one transaction
(`transactions`); Celery work is enqueued on commit (`dispatch`); bad input raises a named
error and changes nothing. The worker's side (execute, fail, the sweeps) lives in
`worker` and is re-exported here, as are the escalation sweep (`people.escalation`) and
the delegations (`people.out_of_office`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, cast

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from . import passkeys
from .answer_check import check_answer, checked_vote
from .arguments import (
    checked_decision,
    function_response_list,
)
from .audit import actions, trail
from .audit.canonical import canonical_json, sha256_hex
from .claims import claim, locked_interrupt, reassign, release, require_answerer, require_pending
from .conf import hitl_settings
from .dispatch import enqueue_run
from .engine.errors import IdempotencyKeyReusedError, UnknownInterruptError
from .engine.events import FunctionResponse, approval_vote
from .engine.questions import is_gate_question
from .engine.quorum import combined_answer
from .engine.state import InterruptRecord
from .engine.transitions import (
    accept_responses,
    cancel_batch,
    checked_answer,
    checked_input,
    retry_batch,
)
from .grants import edit_of
from .models import Decision, Interrupt, Invocation, Session
from .people.escalation import escalate_interrupts
from .people.out_of_office import announce_delegations, delegate, end_delegation
from .policy import (
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    require_control,
    require_person,
)
from .registry import registry
from .sessions import open_session
from .signals import decision_recorded
from .transactions import locked_checkpoint, store, write_transaction
from .worker import (
    enqueue_run_here,
    execute,
    expire_overdue_interrupts,
    fail,
    recover_stalled,
)

__all__ = [
    "announce_delegations",
    "cancel",
    "claim",
    "decide",
    "delegate",
    "end_delegation",
    "escalate_interrupts",
    "execute",
    "expire_overdue_interrupts",
    "fail",
    "open_session",
    "reassign",
    "recover_stalled",
    "release",
    "retry",
    "signing_challenge",
    "start",
    "submit_function_responses",
]


def _actor_id(actor: Any) -> Any:
    """The user id a write records: None for the system, else an active user's pk."""
    require_person(actor)
    return None if actor is None else actor.pk


def start(
    workflow_name: str,
    node_input: Any = None,
    *,
    user: Any = None,
    session: Session | None = None,
    idempotency_key: str | None = None,
) -> Invocation:
    """Create an invocation of the latest registered version and enqueue its first run.

    With `idempotency_key`, a repeat (a client retrying after an unclear outcome) returns
    the invocation the key first created; the same key with another workflow or input
    raises IdempotencyKeyReusedError. Bad input raises InputValidationError (or
    PayloadTooLargeError) and stores nothing. `user` None: the system starts it; an
    anonymous or inactive user raises PermissionDenied.
    """
    require_person(user)
    definition = registry.get(workflow_name)
    node_input = checked_input(
        node_input, hitl_settings.MAX_VALUE_BYTES, hitl_settings.MAX_VALUE_DEPTH
    )
    if idempotency_key is not None:
        existing = _started_with_key(idempotency_key, definition.name, node_input)
        if existing is not None:
            return existing
    try:
        return _create_invocation(definition, node_input, user, session, idempotency_key)
    except IntegrityError:
        if idempotency_key is None:
            raise
        # The same key started concurrently: the first one wins, this is its repeat.
        existing = _started_with_key(idempotency_key, definition.name, node_input)
        if existing is None:
            raise
        return existing


def _started_with_key(key: str, workflow_name: str, node_input: Any) -> Invocation | None:
    existing = Invocation.objects.filter(idempotency_key=key).first()
    if existing is None:
        return None
    if existing.workflow_name != workflow_name or existing.input != node_input:
        raise IdempotencyKeyReusedError(key, str(existing.pk))
    return existing


@write_transaction
def _create_invocation(
    definition: Any, node_input: Any, user: Any, session: Session | None, key: str | None
) -> Invocation:
    if session is None:
        session = Session.objects.create(created_by_id=_actor_id(user))
    invocation = Invocation.objects.create(
        session=session,
        workflow_name=definition.name,
        workflow_version=definition.version,
        input=node_input,
        started_by_id=_actor_id(user),
        idempotency_key=key,
    )
    trail.record(
        actions.INVOCATION_STARTED,
        invocation_id=invocation.pk,
        actor=user,
        data={
            "workflow": definition.name,
            "version": definition.version,
            "input_hash": sha256_hex(canonical_json(node_input)),
        },
    )
    enqueue_run_here(store(), invocation.pk, new=True)
    return invocation


def submit_function_responses(responses: Iterable[Any], *, actor: Any = None) -> Invocation:
    """Accept answers to pending interrupts of one invocation and enqueue its resume.

    `actor`: the user answering (a machine's account too): every rule of each question
    applies (`answer_check.check_answer`): the answer policy must let them answer it, else
    PermissionDenied (an anonymous or inactive user may answer nothing); a question that
    needs several approvals is answered by decisions only (DecisionRequiredError), and so
    is one that needs a signature (passkeys.SignatureRefused, `signature_required`: a
    direct answer carries no assertion). None: the system itself (a node, a management
    command), which those rules do not restrict.

    Raises UnknownInterruptError, InterruptNotPendingError, ResponseValidationError or
    MultipleInvocationsError before storing anything. An identical repeat of an accepted
    answer is a success that changes nothing.
    """
    require_person(actor)
    responses = function_response_list(responses)
    invocation_id = _accept(responses, actor)
    return _invocation_read_on_use(invocation_id)


@functools.cache
def _invocation_query() -> str:
    # A concrete field always has a column (the stubs allow None for other fields).
    columns = ", ".join(cast(str, f.column) for f in Invocation._meta.concrete_fields)
    return f"SELECT {columns} FROM {Invocation._meta.db_table} WHERE id = %s"


def _invocation(invocation_id: Any) -> Invocation:
    """The invocation as it is now (a raw query: on the resume path, building the ORM
    query cost more than reading the row)."""
    key = Invocation._meta.pk.get_db_prep_value(invocation_id, connection)
    return Invocation.objects.raw(_invocation_query(), [key])[0]


def _invocation_read_on_use(invocation_id: Any) -> Invocation:
    """The invocation, read from the database (every field in one query) when a field
    other than its id is first used: a caller that keeps only the id pays no read after
    the resume; one that reads it (the API's reply) sees it as it is then."""
    pk = Invocation._meta.pk
    invocation = Invocation.from_db(connection.alias, [pk.attname], [pk.to_python(invocation_id)])
    # Django reads a deferred field alone, calling refresh_from_db: all of them instead.
    invocation.refresh_from_db = functools.partial(_read_deferred, invocation)  # type: ignore[method-assign]
    return invocation


def _read_deferred(invocation: Invocation, *args: Any, **kwargs: Any) -> None:
    del invocation.refresh_from_db  # read once: from now on, Django's own
    fresh = _invocation(invocation.pk).__dict__
    for field in Invocation._meta.concrete_fields:
        invocation.__dict__.setdefault(field.attname, fresh[field.attname])


@write_transaction
def _accept(responses: list[FunctionResponse], actor: Any) -> Any:
    db = store()
    # The one lock order (invocation row, then its interrupts): answers racing cancel,
    # retry or the deadline sweep queue on the invocation instead of deadlocking.
    interrupts = db.lock_for_answers_sync([r.id for r in responses])
    stand_ins = _checked_direct_answers(actor, responses, interrupts)
    return _store_answers(db, responses, interrupts, actor, stand_ins)


def _checked_direct_answers(
    actor: Any, responses: list[FunctionResponse], interrupts: Mapping[str, Any]
) -> dict[str, Any]:
    """Every rule of each question answered directly (`check_answer`; the system, `actor`
    None, only a gate's grant request); unknown ids are left to accept_responses. Returns,
    by interrupt id, the delegator `actor` answers for where they may only as a delegate."""
    rows = Interrupt.objects.filter(pk__in=list(interrupts)).select_related("invocation")
    questions = {interrupt.pk: interrupt for interrupt in rows}
    stand_ins = {}
    for index, response in enumerate(responses):
        interrupt = questions.get(response.id)
        if interrupt is None:
            continue
        answer = response.response
        if is_gate_question(response.id):  # its grant rule reads the answer as it is stored
            answer = checked_answer(
                response.id,
                answer,
                hitl_settings.MAX_RESPONSE_BYTES,
                hitl_settings.MAX_VALUE_DEPTH,
                field=f"function_responses[{index}].response",
            )
        admitted = check_answer(interrupt, actor, answer)
        if admitted.on_behalf_of is not None:
            stand_ins[interrupt.pk] = admitted.on_behalf_of
    return stand_ins


def _store_answers(
    db: Any,
    responses: list[FunctionResponse],
    interrupts: dict[str, InterruptRecord],
    actor: Any,
    on_behalf_of: Mapping[str, Any],
) -> Any:
    """Accept answers whose interrupts are locked and whose answerer is checked: the path
    of submit_function_responses and of a decision that settles its question.
    `on_behalf_of`: by interrupt id, whom `actor` stood in for, where they did."""
    acceptance = accept_responses(
        responses,
        interrupts,
        actor=_actor_id(actor),
        now=timezone.now(),
        max_bytes=hitl_settings.MAX_RESPONSE_BYTES,
        max_depth=hitl_settings.MAX_VALUE_DEPTH,
    )
    if acceptance.batch:
        db.commit_sync(acceptance.batch, savepoint=False)
        for interrupt_id, answer in acceptance.accepted.items():
            trail.record(
                actions.ANSWER_ACCEPTED,
                interrupt=interrupts[interrupt_id],
                actor=actor,
                on_behalf_of=on_behalf_of.get(interrupt_id),
                data={"response": answer},
            )
        enqueue_run_here(db, acceptance.invocation_id)
    return acceptance.invocation_id


@write_transaction
def cancel(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Cancel: pending interrupts become cancelled, a running execution stops at its next
    checkpoint, the invocation ends CANCELLED. A person needs
    `actor.has_perm("workflows.cancel_invocation", invocation)` (the model permission, or
    having started it), else PermissionDenied."""
    require_person(actor)
    db = store()
    checkpoint = locked_checkpoint(db, invocation)
    require_control(actor, CANCEL_PERMISSION, invocation)
    batch = cancel_batch(checkpoint, actor=_actor_id(actor), now=timezone.now())
    db.commit_sync(batch)
    trail.record(
        actions.INVOCATION_CANCELLED,
        invocation_id=checkpoint.invocation.id,
        actor=actor,
        data={
            "status": checkpoint.invocation.status,
            "cancelled_interrupts": [r.interrupt_id for r in batch.resolutions],
        },
    )
    return _invocation(checkpoint.invocation.id)


@write_transaction
def retry(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Re-drive a FAILED invocation: its failed node runs re-run, completed ones do not. A
    person needs `actor.has_perm("workflows.retry_invocation", invocation)` (the model
    permission, or having started it), else PermissionDenied."""
    require_person(actor)
    db = store()
    checkpoint = locked_checkpoint(db, invocation)
    require_control(actor, RETRY_PERMISSION, invocation)
    db.commit_sync(retry_batch(checkpoint))
    Invocation.objects.filter(pk=checkpoint.invocation.id).update(
        finished_at=None, unfinished_deliveries=0
    )
    trail.record(
        actions.INVOCATION_RETRIED,
        invocation_id=checkpoint.invocation.id,
        actor=actor,
        data={"error": checkpoint.invocation.error or ""},
    )
    enqueue_run(checkpoint.invocation.id)
    return _invocation(checkpoint.invocation.id)


# --- Decisions: who answers -------------------------------------------------------------------
# A person's answer is a Decision; enough of them become the interrupt's FunctionResponse,
# accepted in the same transaction by the path submit_function_responses takes after its
# checks (a person may not answer a quorum's question directly; the decisions may). Each
# function takes its locks in the project's one order (the invocation row, then the
# interrupt row, then the decisions), so concurrent deciders queue instead of deadlocking.


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
    decisions = list(interrupt.decisions.select_related("actor"))
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
    if answer is not None:
        # The decider passed the rule above; a quorum's answer is this service's to give.
        db = store()
        answered = [FunctionResponse(interrupt.pk, _node_name(interrupt), answer)]
        locked = db.lock_for_answers_sync([interrupt.pk])
        stand_ins = {interrupt.pk: decision.on_behalf_of} if decision.on_behalf_of else {}
        _store_answers(db, answered, locked, actor, stand_ins)
        interrupt.refresh_from_db()
    transaction.on_commit(
        lambda: decision_recorded.send_robust(
            sender=Decision, decision_id=decision.pk, interrupt_id=interrupt.pk
        )
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
