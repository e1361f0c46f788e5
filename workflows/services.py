"""The one write path: start, submit_function_responses, cancel, retry (and the worker's
execute, expiry and recovery). Each change is one transaction; Celery work is enqueued
on commit; bad input raises a named error and changes nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from .conf import hitl_settings
from .engine.errors import (
    AlreadyClaimedError,
    AlreadyDecidedError,
    DefinitionChangedError,
    InterruptNotPendingError,
    InvocationNotFoundError,
    ResponseValidationError,
    UnknownInterruptError,
)
from .engine.events import FunctionResponse, RequestInput, parse_assignee
from .engine.runner import Runner
from .engine.schema import unwrap_response, validate_response
from .engine.state import WriteBatch
from .engine.status import InterruptStatus, NodeStatus
from .engine.transitions import accept_responses, cancel_batch, expire_batch, retry_batch
from .models import OPEN_STATUSES, Decision, Interrupt, Invocation, NodeRun, Session
from .policy import REASSIGN_PERMISSION, answer_policy, can_reassign
from .registry import registry
from .signals import decision_recorded
from .store import ANSWERED, DjangoStore

logger = logging.getLogger(__name__)


def store() -> DjangoStore:
    return DjangoStore(lease_seconds=hitl_settings.LEASE_SECONDS)


def _enqueue_run(invocation_id: Any) -> None:
    transaction.on_commit(lambda: _send_run(invocation_id))


def _send_run(invocation_id: Any) -> None:
    from .tasks import run_invocation

    try:
        run_invocation.apply_async(args=[str(invocation_id)])
    except BrokerError:
        # What the transaction stored is committed and safe: the answer (or start, retry,
        # expiry) is accepted, and recover_stalled re-enqueues the run once the broker is
        # back. The caller's request succeeded; it must not see an error.
        logger.warning("broker unavailable: run of invocation %s not enqueued", invocation_id)


def _actor_id(actor: Any) -> Any:
    if actor is None or not getattr(actor, "is_authenticated", True):
        return None
    return getattr(actor, "pk", actor)


def _ensure_json(value: Any, field: str) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ResponseValidationError(None, field, f"must be JSON-serializable ({exc})") from None


def start(
    workflow_name: str,
    node_input: Any = None,
    *,
    user: Any = None,
    session: Session | None = None,
) -> Invocation:
    """Create an invocation of the latest registered version and enqueue its first run."""
    definition = registry.get(workflow_name)
    _ensure_json(node_input, "input")
    with transaction.atomic():
        if session is None:
            session = Session.objects.create(created_by_id=_actor_id(user))
        invocation = Invocation.objects.create(
            session=session,
            workflow_name=definition.name,
            workflow_version=definition.version,
            input=node_input,
            started_by_id=_actor_id(user),
        )
        _enqueue_run(invocation.pk)
    return invocation


FUNCTION_RESPONSE_SHAPE = (
    'a FunctionResponse or a dict {"id": <interrupt id>, "name": <node name>, "response": ...}'
)
FUNCTION_RESPONSE_KEYS = {"id", "name", "response"}


def _described(value: Any) -> str:
    """What a caller passed, for an error message: its type and a short repr."""
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{type(value).__name__} {shown}"


def _as_function_response(value: Any, index: int = 0) -> FunctionResponse:
    field = f"function_responses[{index}]"
    if isinstance(value, FunctionResponse):
        return value
    if isinstance(value, Mapping):
        unexpected = sorted(set(value) - FUNCTION_RESPONSE_KEYS, key=str)
        if unexpected:
            raise ResponseValidationError(
                None,
                field,
                f"unexpected keys {unexpected}: a function response has only "
                f'"id", "name" and "response" (put the answer under "response")',
            )
        if not isinstance(value.get("id"), str) or not value["id"]:
            raise ResponseValidationError(
                None,
                f"{field}.id",
                f"needs the interrupt id, a non-empty string; got {_described(value.get('id'))}",
            )
        if "response" not in value:
            raise ResponseValidationError(None, f"{field}.response", "the answer is missing")
        return FunctionResponse(value["id"], str(value.get("name") or ""), value["response"])
    hint = ""
    if isinstance(value, Interrupt):
        hint = f'; to answer this interrupt pass {{"id": {value.pk!r}, "response": ...}}'
    elif isinstance(value, UUID):
        hint = "; an invocation id? Answers name the interrupt id (Interrupt.id, a string)"
    raise ResponseValidationError(
        None, field, f"got {_described(value)}; wants {FUNCTION_RESPONSE_SHAPE}{hint}"
    )


def _function_response_list(responses: Any) -> list[FunctionResponse]:
    """The submission as a list of FunctionResponses; a clear error for a wrong shape."""
    if isinstance(responses, Mapping | FunctionResponse | str | bytes) or not isinstance(
        responses, Iterable
    ):
        raise ResponseValidationError(
            None,
            "function_responses",
            f"wants a list of function responses, each {FUNCTION_RESPONSE_SHAPE}; "
            f"got {_described(responses)}"
            + ("; wrap it in a list" if isinstance(responses, Mapping | FunctionResponse) else ""),
        )
    return [_as_function_response(value, index) for index, value in enumerate(responses)]


def submit_function_responses(responses: Iterable[Any], *, actor: Any = None) -> Invocation:
    """Accept answers to pending interrupts of one invocation and enqueue its resume.

    Raises UnknownInterruptError, InterruptNotPendingError, ResponseValidationError or
    MultipleInvocationsError before storing anything. An identical repeat of an accepted
    answer is a success that changes nothing.
    """
    responses = _function_response_list(responses)
    for response in responses:
        _ensure_json(response.response, "response")
    db = store()
    with transaction.atomic():
        interrupts = db.load_interrupts_sync([r.id for r in responses], lock=True)
        acceptance = accept_responses(
            responses, interrupts, actor=_actor_id(actor), now=timezone.now()
        )
        if acceptance.batch:
            db.commit_sync(acceptance.batch)
            _enqueue_run(acceptance.invocation_id)
    return Invocation.objects.get(pk=acceptance.invocation_id)


def _locked_checkpoint(db: DjangoStore, invocation: Invocation | Any) -> Any:
    invocation_id = getattr(invocation, "pk", invocation)
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    if checkpoint is None:
        raise InvocationNotFoundError(invocation_id)
    return checkpoint


def cancel(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Cancel: pending interrupts become cancelled, a running execution stops at its next
    checkpoint, the invocation ends CANCELLED."""
    db = store()
    with transaction.atomic():
        checkpoint = _locked_checkpoint(db, invocation)
        db.commit_sync(cancel_batch(checkpoint, actor=_actor_id(actor), now=timezone.now()))
    return Invocation.objects.get(pk=checkpoint.invocation.id)


def retry(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Re-drive a FAILED invocation: its failed node runs re-run, completed ones do not."""
    db = store()
    with transaction.atomic():
        checkpoint = _locked_checkpoint(db, invocation)
        db.commit_sync(retry_batch(checkpoint))
        Invocation.objects.filter(pk=checkpoint.invocation.id).update(
            finished_at=None, unfinished_deliveries=0
        )
        _enqueue_run(checkpoint.invocation.id)
    return Invocation.objects.get(pk=checkpoint.invocation.id)


def _live_lease(now: datetime) -> Q:
    return Q(lease_expires_at__gte=now) & ~Q(lease_owner="")


def fail(invocation_id: Any, error: str) -> None:
    """Mark an open invocation FAILED (a poison task, an incompatible definition).

    Not while another execution holds a live lease: that run decides the outcome (the
    invocation finishes once)."""
    db = store()
    with transaction.atomic():
        checkpoint = _locked_checkpoint(db, invocation_id)
        record = checkpoint.invocation
        if record.status.is_final:
            return
        if Invocation.objects.filter(_live_lease(timezone.now()), pk=record.id).exists():
            return
        record.status, record.error = NodeStatus.FAILED, error
        db.commit_sync(WriteBatch(record.id, invocation=record))


def execute(invocation_id: str) -> None:
    """Run the engine for an invocation until it waits or finishes (the worker's job).

    Poison guard: a run that never finishes (a task that kills its worker every time)
    leaves its execution lease behind until the lease expires. Each delivery that takes
    over such an expired lease counts one unfinished run; at HITL["MAX_DELIVERIES"] of
    them in a row the invocation fails instead of looping forever. Deliveries that find
    another run alive (concurrent answers) count nothing.
    """
    now = timezone.now()
    rows = Invocation.objects.filter(pk=invocation_id, status__in=OPEN_STATUSES)
    rows.exclude(lease_owner="").filter(lease_expires_at__lt=now).update(
        lease_owner="",
        lease_expires_at=None,
        unfinished_deliveries=F("unfinished_deliveries") + 1,
    )
    row = rows.values("workflow_name", "workflow_version", "unfinished_deliveries").first()
    if row is None:
        return
    if row["unfinished_deliveries"] >= hitl_settings.MAX_DELIVERIES:
        fail(
            invocation_id,
            f"gave up after {row['unfinished_deliveries']} runs that never finished "
            f'(a run task that kills its worker?); HITL["MAX_DELIVERIES"] is '
            f"{hitl_settings.MAX_DELIVERIES}",
        )
        return
    try:
        workflow = registry.for_invocation(
            row["workflow_name"],
            row["workflow_version"],
            lambda: NodeRun.objects.filter(invocation_id=invocation_id).values_list(
                "path", flat=True
            ),
        )
    except (DefinitionChangedError, LookupError) as exc:
        fail(invocation_id, f"{type(exc).__name__}: {exc}")
        return
    runner = Runner(workflow, store=store(), lease_ttl=hitl_settings.LEASE_SECONDS)
    async_to_sync(runner.advance)(str(invocation_id), wait=False)
    # A run finished and let go of the lease: the invocation is not poison.
    Invocation.objects.filter(pk=invocation_id, lease_owner="", unfinished_deliveries__gt=0).update(
        unfinished_deliveries=0
    )


def expire_overdue_interrupts(now: datetime | None = None) -> int:
    """Expire each pending interrupt past its deadline exactly once and apply its policy."""
    now = now or timezone.now()
    overdue = Interrupt.objects.filter(status=InterruptStatus.PENDING, deadline__lte=now)
    db = store()
    expired = 0
    for interrupt_id, invocation_id in overdue.values_list("id", "invocation_id")[:500]:
        with transaction.atomic():
            checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
            record = checkpoint.interrupts.get(interrupt_id) if checkpoint else None
            if record is None or record.status != InterruptStatus.PENDING:
                continue  # answered or expired meanwhile
            db.commit_sync(expire_batch(checkpoint, interrupt_id, now))
            _enqueue_run(invocation_id)
        expired += 1
    return expired


def recover_stalled(now: datetime | None = None) -> int:
    """Re-enqueue open invocations nobody is running: stale with no live lease, or holding
    answers no run consumed (accepted while the broker was down, or a worker died)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=hitl_settings.STALLED_AFTER_SECONDS)
    unleased = Q(lease_owner="") | Q(lease_expires_at__lt=now)
    stalled = Invocation.objects.filter(
        unleased, status__in=[NodeStatus.PENDING, NodeStatus.RUNNING], updated_at__lt=stale
    ).values_list("pk", flat=True)
    unconsumed = (
        Interrupt.objects.filter(
            consumed=False,
            status__in=ANSWERED,
            resolved_at__lt=stale,
            invocation__status__in=OPEN_STATUSES,
        )
        .filter(Q(invocation__lease_owner="") | Q(invocation__lease_expires_at__lt=now))
        .values_list("invocation_id", flat=True)
    )
    invocation_ids = set(stalled[:1000]) | set(unconsumed[:1000])
    from .tasks import run_invocation

    for invocation_id in invocation_ids:
        run_invocation.apply_async(args=[str(invocation_id)])
    return len(invocation_ids)


# --- Decisions: who answers (DESIGN 4.1) ------------------------------------------------------
# A person's answer is a Decision; enough of them become the interrupt's FunctionResponse,
# submitted through submit_function_responses in the same transaction. Each function
# takes its locks in the project's one order (the invocation row, then the interrupt row,
# then the decisions), so concurrent deciders queue instead of deadlocking.


def _locked_interrupt(interrupt_id: str) -> Interrupt:
    invocation_id = (
        Interrupt.objects.filter(pk=interrupt_id).values_list("invocation_id", flat=True).first()
    )
    if invocation_id is None:
        raise UnknownInterruptError(interrupt_id)
    list(Invocation.objects.select_for_update(no_key=True).filter(pk=invocation_id).values("pk"))
    return (
        Interrupt.objects.select_for_update(no_key=True, of=("self",))
        .select_related("invocation")
        .get(pk=interrupt_id)
    )


def _require_pending(interrupt: Interrupt) -> None:
    if interrupt.status != InterruptStatus.PENDING:
        raise InterruptNotPendingError(interrupt.pk, interrupt.status)


def _require_answerer(actor: Any, interrupt: Interrupt) -> None:
    policy = answer_policy()
    if not policy.can_answer(actor, interrupt):
        raise PermissionDenied(policy.refusal(actor, interrupt))


def _node_name(interrupt: Interrupt) -> str:
    return interrupt.path.rsplit("/", 1)[-1].split("@", 1)[0]


def _decision_summary(decision: Decision) -> dict[str, Any]:
    return {
        "actor": decision.actor.get_username(),
        "approved": decision.response["approved"],
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
    approvals = sum(d.response["approved"] is True for d in decisions)
    if latest.response["approved"] is False or approvals >= interrupt.quorum:
        return {**latest.response, "decisions": [_decision_summary(d) for d in decisions]}
    return None


def _check_quorum_vote(interrupt: Interrupt, value: Any) -> None:
    if interrupt.quorum == 1:
        return
    if not isinstance(value, dict) or not isinstance(value.get("approved"), bool):
        raise ResponseValidationError(
            interrupt.pk, "approved", "a quorum decision must approve or reject (true or false)"
        )
    if "decisions" in value:
        raise ResponseValidationError(
            interrupt.pk, "decisions", "is added by the approval service; leave it out"
        )


def decide(interrupt_id: str, response: Any, *, actor: Any, comment: str = "") -> Decision:
    """Record `actor`'s decision on a pending interrupt; once the quorum is met (or on the
    first rejection of a quorum vote), submit the interrupt's answer in the same
    transaction.

    Raises PermissionDenied (the answer policy refuses), AlreadyDecidedError (one decision
    per person), UnknownInterruptError, InterruptNotPendingError or ResponseValidationError;
    nothing is stored then. `decision.interrupt.status` tells whether it answered.
    """
    _ensure_json(response, "response")
    with transaction.atomic():
        interrupt = _locked_interrupt(interrupt_id)
        _require_answerer(actor, interrupt)
        decisions = list(interrupt.decisions.select_related("actor"))
        if any(d.actor_id == actor.pk for d in decisions):
            raise AlreadyDecidedError(interrupt.pk, actor.get_username())
        _require_pending(interrupt)
        value = unwrap_response(response)
        validate_response(interrupt.pk, interrupt.response_schema, value)
        _check_quorum_vote(interrupt, value)
        decision = Decision.objects.create(
            interrupt=interrupt, actor=actor, response=value, comment=comment
        )
        decisions.append(decision)
        answer = _quorum_answer(interrupt, decisions)
        if answer is not None:
            submit_function_responses(
                [FunctionResponse(interrupt.pk, _node_name(interrupt), answer)], actor=actor
            )
            interrupt.refresh_from_db()
        transaction.on_commit(
            lambda: decision_recorded.send_robust(
                sender=Decision, decision_id=decision.pk, interrupt_id=interrupt.pk
            )
        )
    return decision


def claim(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Mark `actor` as working on a pending interrupt they may answer. Claiming one's own
    claim again changes nothing; someone else's claim raises AlreadyClaimedError (a claim
    never blocks a decision, it only tells colleagues)."""
    with transaction.atomic():
        interrupt = _locked_interrupt(interrupt_id)
        _require_answerer(actor, interrupt)
        _require_pending(interrupt)
        if interrupt.claimed_by_id not in (None, actor.pk):
            raise AlreadyClaimedError(interrupt.pk, interrupt.claimed_by.get_username())
        if interrupt.claimed_by_id is None:
            interrupt.claimed_by, interrupt.claimed_at = actor, timezone.now()
            interrupt.save(update_fields=["claimed_by", "claimed_at"])
    return interrupt


def release(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Drop the claim on an interrupt: its claimer may, and so may a supervisor
    (`workflows.reassign_interrupt`). Releasing an unclaimed interrupt changes nothing."""
    with transaction.atomic():
        interrupt = _locked_interrupt(interrupt_id)
        if interrupt.claimed_by_id is None:
            return interrupt
        if interrupt.claimed_by_id != actor.pk and not actor.has_perm(REASSIGN_PERMISSION):
            raise PermissionDenied(
                f"interrupt {interrupt.pk!r} is claimed by "
                f"{interrupt.claimed_by.get_username()}; only they or a supervisor may release it"
            )
        interrupt.claimed_by, interrupt.claimed_at = None, None
        interrupt.save(update_fields=["claimed_by", "claimed_at"])
    return interrupt


def _checked_assignees(interrupt: Interrupt, assignees: Any) -> list[str]:
    """`assignees` if RequestInput accepts them with this interrupt's schema and quorum,
    and every user and group they name exists."""
    try:
        request = RequestInput(
            response_schema=interrupt.response_schema,
            assignees=assignees,
            quorum=interrupt.quorum,
        )
    except ValueError as exc:
        raise ResponseValidationError(interrupt.pk, "assignees", str(exc)) from None
    named: dict[str, set[str]] = {"user": set(), "group": set()}
    for kind, name in map(parse_assignee, request.assignees):
        named[kind].add(name)
    users = get_user_model()
    username = users.USERNAME_FIELD
    found = {
        "user": set(
            users.objects.filter(**{f"{username}__in": named["user"]}).values_list(
                username, flat=True
            )
        ),
        "group": set(Group.objects.filter(name__in=named["group"]).values_list("name", flat=True)),
    }
    missing = [f"{kind}:{name}" for kind in named for name in sorted(named[kind] - found[kind])]
    if missing:
        raise ResponseValidationError(interrupt.pk, "assignees", f"no such {', '.join(missing)}")
    return request.assignees


def reassign(interrupt_id: str, assignees: list[str], *, actor: Any) -> Interrupt:
    """Replace who may answer a pending interrupt (an empty list: anyone with the answer
    permission), and drop its claim. Allowed to supervisors (`workflows.reassign_interrupt`)
    and to those who may answer it now. Decisions already recorded stay."""
    with transaction.atomic():
        interrupt = _locked_interrupt(interrupt_id)
        if not can_reassign(actor, interrupt):
            raise PermissionDenied(
                f"{actor.get_username()} may not reassign interrupt {interrupt.pk!r}"
            )
        _require_pending(interrupt)
        interrupt.assignees = _checked_assignees(interrupt, assignees)
        interrupt.claimed_by, interrupt.claimed_at = None, None
        interrupt.save(update_fields=["assignees", "claimed_by", "claimed_at"])
    return interrupt
