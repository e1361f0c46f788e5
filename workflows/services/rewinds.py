"""Change an answer already given (DESIGN 3.8), from the request side: `rewind`,
`plan_rewind` and, for a question answered by several people's decisions, `reopen` (a new
round; `decisions.decide` applies the rewind when the round's quorum is met).

The rule is the engine's (`engine.rewind`); here it runs in one transaction with the
invocation's row locked and its lease free (a live execution refuses it: `running`), every
rule a person's answer carries checked (`answer_check`), the audit entries written, and the
drive enqueued on commit."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import notifications
from ..arguments import checked_interrupt_id
from ..audit import actions, trail
from ..conf import hitl_settings
from ..dispatch import enqueue_run
from ..engine.errors import (
    NotRewindableError,
    UnknownInterruptError,
)
from ..engine.rewind import RewindPlan, check_rewindable, compute_rewind
from ..engine.rewind import plan_rewind as plan
from ..engine.state import InterruptRecord, RewindReads
from ..engine.status import InterruptStatus
from ..engine.transitions import checked_answer
from ..models import Interrupt, Invocation
from ..policy import require_person, require_rewinder
from ..registry import registry
from ..signals import invocation_rewound, send_on_commit
from ..store import DjangoStore
from ..transactions import store, write_transaction
from .answer_check import check_answer
from .answers import actor_id
from .claims import locked_interrupt


def plan_rewind(interrupt_id: str, *, actor: Any) -> RewindPlan:
    """What changing the answer to `interrupt_id` would do (RewindPlan): a read that
    changes nothing. Raises what `rewind` raises before its effects check."""
    require_person(actor)
    db = store()
    interrupt, record = _question(db, interrupt_id, lock=False)
    require_rewinder(actor, interrupt)
    reads = db.load_rewind_reads_sync(record.invocation_id, interrupt_id)
    record = check_rewindable(interrupt_id, record, reads, by_decisions=_by_decisions(record))
    return plan(_workflow(interrupt.invocation), reads, record)


@write_transaction
def rewind(
    interrupt_id: str,
    response: Any,
    *,
    actor: Any,
    comment: str = "",
    confirm_effects: Any = False,
) -> Invocation:
    """Change the answer to `interrupt_id` to `response` (DESIGN 3.8) and enqueue the
    drive: only what depended on the old answer runs again.

    A person needs `workflows.rewind_interrupt` and the answer rule for the new answer
    (PermissionDenied); a signed question's new answer is a decision (reopen it). Refused,
    with nothing stored: UnknownInterruptError, NotRewindableError (`reason`),
    DecisionRequiredError (quorum above 1: reopen it), ResponseValidationError,
    EffectsWouldRepeatError (confirm them with `confirm_effects`: True, or the (path,
    name) pairs shown). An answer equal to the current one changes nothing."""
    require_person(actor)
    return apply_rewind(interrupt_id, response, actor, comment, confirm_effects)


def apply_rewind(
    interrupt_id: str,
    response: Any,
    actor: Any,
    comment: str = "",
    confirm_effects: Any = False,
    *,
    by_decisions: bool = False,
    on_behalf_of: Any = None,
) -> Invocation:
    """`rewind`, inside the caller's transaction. `by_decisions`: the answer of a reopened
    question's round, settled by its decisions (each checked when it was recorded)."""
    db = store()
    interrupt, record = _question(db, interrupt_id)
    if not by_decisions:
        require_rewinder(actor, interrupt)
    reads = _leased_reads(db, record)
    record = check_rewindable(interrupt_id, record, reads, by_decisions=by_decisions)
    assert reads is not None
    value = checked_answer(
        interrupt_id, response, hitl_settings.MAX_VALUE_BYTES, hitl_settings.MAX_VALUE_DEPTH
    )
    if not by_decisions:
        on_behalf_of = check_answer(interrupt, actor, value).on_behalf_of
    computed = compute_rewind(
        _workflow(interrupt.invocation),
        reads,
        record,
        value,
        actor=actor_id(actor),
        now=timezone.now(),
        confirm_effects=confirm_effects,
    )
    invocation_id = record.invocation_id
    if computed.batch is None:
        return Invocation.objects.get(pk=invocation_id)
    db.commit_sync(computed.batch, savepoint=False)
    changed = computed.plan
    trail.record(
        actions.ANSWER_REWOUND,
        interrupt=interrupt,
        actor=actor,
        on_behalf_of=on_behalf_of,
        data={
            "old_response": computed.old_response,
            "response": computed.response,
            "reopened": changed.reopened,
            "superseded": changed.superseded,
            "superseded_questions": changed.questions,
            "confirmed_effects": [[e["path"], e["name"]] for e in changed.effects],
            "comment": comment,
        },
    )
    for question in changed.questions:
        was = reads.questions[question]
        trail.record(
            actions.INTERRUPT_SUPERSEDED,
            interrupt=question,
            actor=actor,
            data={
                "rewound": interrupt_id,
                "round": was.round,
                "response": was.response,
                "answerer": was.resolved_by,
            },
        )
    send_on_commit(
        invocation_rewound,
        sender=Invocation,
        invocation_id=invocation_id,
        interrupt_id=interrupt_id,
    )
    if changed.questions:
        transaction.on_commit(
            partial(notifications.enqueue, notifications.SUPERSEDED, changed.questions),
            robust=True,
        )
    enqueue_run(invocation_id)
    return Invocation.objects.get(pk=invocation_id)


@write_transaction
def reopen(interrupt_id: str, *, actor: Any, comment: str = "") -> Interrupt:
    """Open a new round of decisions on an answered question that people decide (a quorum
    above 1, or a signature): the same id, `round` + 1, pending again; the earlier round's
    decisions, claims and escalation steps stay as history and do not count. Nothing is
    superseded until the round's quorum is met; then `decide` applies the rewind with the
    round's answer. Refused as `rewind` is (NotRewindableError, PermissionDenied)."""
    require_person(actor)
    db = store()
    interrupt, record = _question(db, interrupt_id)
    require_rewinder(actor, interrupt)
    reads = _leased_reads(db, record)
    record = check_rewindable(interrupt_id, record, reads, by_decisions=True)
    if record.status == InterruptStatus.PENDING:
        raise NotRewindableError(interrupt_id, "pending", "its round is open: decide on it")
    if not _by_decisions(record):
        raise NotRewindableError(
            interrupt_id, "not_decided", "one person answers it: change the answer (rewind)"
        )
    Interrupt.objects.filter(pk=interrupt_id).update(
        status=InterruptStatus.PENDING,
        round=record.round + 1,
        consumed=True,  # the earlier round's answer stays applied until the new one is
        deferred=False,
        resolved_by=None,
        resolved_at=None,
        claimed_by=None,
        claimed_at=None,
        escalation_step=0,
        next_escalation_at=None,
        deadline=None,
    )
    trail.record(
        actions.INTERRUPT_REOPENED,
        interrupt=interrupt,
        actor=actor,
        data={"round": record.round + 1, "answer": record.response, "comment": comment},
    )
    transaction.on_commit(
        partial(notifications.enqueue, notifications.OPENED, [interrupt_id]), robust=True
    )
    interrupt.refresh_from_db()
    return interrupt


def is_reopened(interrupt: Interrupt) -> bool:
    """A question reopened for a new round of decisions: pending, its earlier round's
    answer applied (its decisions settle a rewind, not a first answer)."""
    return interrupt.status == InterruptStatus.PENDING and interrupt.consumed


def _by_decisions(record: InterruptRecord) -> bool:
    return record.request.quorum > 1 or record.request.require_signature


def _question(
    db: DjangoStore, interrupt_id: str, *, lock: bool = True
) -> tuple[Interrupt, InterruptRecord]:
    """The question (model and record), with `lock` its invocation's row and its own
    locked in the one lock order (`claims.locked_interrupt`); UnknownInterruptError when
    there is none."""
    if lock:
        interrupt = locked_interrupt(interrupt_id)
    else:
        checked_interrupt_id(interrupt_id)
        found = Interrupt.objects.select_related("invocation").filter(pk=interrupt_id).first()
        if found is None:
            raise UnknownInterruptError(interrupt_id)
        interrupt = found
    return interrupt, db.load_interrupts_sync([interrupt_id])[interrupt_id]


def _leased_reads(db: DjangoStore, record: InterruptRecord) -> RewindReads | None:
    """The rewind's reads when no live execution holds the invocation's lease (its row is
    locked: none can take it before this commits); None when one does."""
    invocation = Invocation.objects.filter(pk=record.invocation_id).values(
        "lease_owner", "lease_expires_at"
    )[0]
    expires = invocation["lease_expires_at"]
    if invocation["lease_owner"] and expires is not None and expires > timezone.now():
        return None
    return db.load_rewind_reads_sync(record.invocation_id, record.id)


def _workflow(invocation: Invocation) -> Any:
    return registry.for_invocation(
        invocation.workflow_name,
        invocation.workflow_version,
        lambda: invocation.node_runs.values_list("path", flat=True),
    )
