"""Accepting answers, the part every door shares once it has found its question: the
interrupts locked in the one lock order, every rule of each question asked
(`answer_check`), the answers stored with their audit entries, the resume enqueued.
`services.submit_function_responses` and `decisions.decide` (a decision that settles its
question) both end here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from ..audit import actions, trail
from ..conf import hitl_settings
from ..engine.events import FunctionResponse
from ..engine.questions import is_gate_question
from ..engine.state import InterruptRecord
from ..engine.transitions import accept_responses, checked_answer
from ..models import Interrupt
from ..policy import require_person
from ..transactions import store, write_transaction
from .answer_check import check_answer
from .runs import RunHere


def actor_id(actor: Any) -> Any:
    """The user id a write records: None for the system, else an active user's pk."""
    require_person(actor)
    return None if actor is None else actor.pk


@write_transaction
def accept(responses: list[FunctionResponse], actor: Any) -> Any:
    db = store()
    # The one lock order (invocation row, then its interrupts): answers racing cancel,
    # retry or the deadline sweep queue on the invocation instead of deadlocking.
    interrupts = db.lock_for_answers_sync([r.id for r in responses])
    stand_ins = _checked_direct_answers(actor, responses, interrupts)
    return store_answers(db, responses, interrupts, actor, stand_ins)


def _checked_direct_answers(
    actor: Any, responses: list[FunctionResponse], interrupts: Mapping[str, Any]
) -> dict[str, Any]:
    """Every rule of each question answered directly (`check_answer`; the system, `actor`
    None, only a gate's grant request); unknown ids are left to accept_responses. Returns,
    by interrupt id, the delegator `actor` answers for where they may only as a delegate."""
    if actor is None:  # the system's check reads only the id and payload: no second read
        questions = {
            pk: Interrupt(id=pk, payload=record.request.payload)
            for pk, record in interrupts.items()
        }
    else:
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


def store_answers(
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
        actor=actor_id(actor),
        now=timezone.now(),
        max_bytes=hitl_settings.MAX_RESPONSE_BYTES,
        max_depth=hitl_settings.MAX_VALUE_DEPTH,
    )
    if not acceptance.batch:
        return acceptance.invocation_id
    entries = [
        {
            "interrupt": interrupts[interrupt_id],
            "actor": actor,
            "on_behalf_of": on_behalf_of.get(interrupt_id),
            "data": {"response": answer},
        }
        for interrupt_id, answer in acceptance.accepted.items()
    ]
    # Where the database appends an entry in one statement, the entries and the run's
    # lease go with the answers' writes: one round trip on PostgreSQL instead of three.
    appended = [trail.appending(actions.ANSWER_ACCEPTED, **entry) for entry in entries]
    run = RunHere(db, acceptance.invocation_id)
    along = [found[1] for found in appended if found is not None]
    db.commit_with_sync(acceptance.batch, along + run.lease_statements())
    for entry, found in zip(entries, appended, strict=True):
        if found is None:
            trail.record(actions.ANSWER_ACCEPTED, **entry)
    run.enqueue()
    return acceptance.invocation_id
