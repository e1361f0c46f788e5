"""The one write path: start, submit_function_responses, cancel, retry (and the worker's
execute, expiry and recovery). Each change is one transaction; Celery work is enqueued
on commit; bad input raises a named error and changes nothing."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from .conf import hitl_settings
from .engine.errors import (
    AlreadyClaimedError,
    AlreadyDecidedError,
    DefinitionChangedError,
    IdempotencyKeyReusedError,
    InterruptNotPendingError,
    InvocationNotFoundError,
    ResponseValidationError,
    UnknownInterruptError,
)
from .engine.events import DefaultResponse, FunctionResponse, RequestInput, parse_assignee
from .engine.runner import Runner
from .engine.schema import unwrap_response, validate_response
from .engine.state import WriteBatch
from .engine.status import InterruptStatus, NodeStatus
from .engine.transitions import (
    accept_responses,
    cancel_batch,
    checked_answer,
    checked_input,
    expire_batch,
    retry_batch,
)
from .models import OPEN_STATUSES, Decision, Interrupt, Invocation, NodeRun, Session
from .policy import REASSIGN_PERMISSION, answer_policy, can_reassign
from .registry import registry
from .signals import decision_recorded
from .store import ANSWERED, DjangoStore

logger = logging.getLogger(__name__)


def store() -> DjangoStore:
    return DjangoStore(lease_seconds=hitl_settings.LEASE_SECONDS)


# Conflicts a write transaction may meet and that succeed when tried again: PostgreSQL's
# deadlock, serialization and lock-timeout errors, and SQLite's busy database.
RETRYABLE_SQLSTATES = {"40P01", "40001", "55P03"}
WRITE_ATTEMPTS = 8


def _retryable(error: OperationalError) -> bool:
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in RETRYABLE_SQLSTATES:
        return True
    return connection.vendor == "sqlite" and "locked" in str(error)


def write_transaction(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run `func` in one transaction, tried again (up to WRITE_ATTEMPTS times, with a short
    random pause) when the database reports a conflict that a retry resolves. Inside a
    caller's transaction it runs once, in a savepoint: only the outermost can retry."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if connection.in_atomic_block:
            with transaction.atomic():
                return func(*args, **kwargs)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except OperationalError as error:
                if attempt == WRITE_ATTEMPTS or not _retryable(error):
                    raise
                logger.info("%s: %s; trying again (%d)", func.__name__, error, attempt)
                time.sleep(random.uniform(0, min(0.02 * 2**attempt, 1.0)))
        raise AssertionError("unreachable")

    return wrapper


def _enqueue_run(invocation_id: Any) -> None:
    # robust: a failing on-commit callback of someone else's never skips this one.
    transaction.on_commit(lambda: _send_run(invocation_id), robust=True)


# Publishing is bounded in time (with the broker timeouts of docs/embedding.md): what the
# transaction stored is safe, and recover_stalled enqueues it later when publishing fails.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}


def _send_run(invocation_id: Any) -> None:
    from .tasks import run_invocation

    try:
        run_invocation.apply_async(
            args=[str(invocation_id)], retry=True, retry_policy=PUBLISH_RETRY_POLICY
        )
    except Exception:  # the broker is down or hung (or, in eager mode, the run failed):
        # the caller's request succeeded all the same
        logger.warning(
            "run of invocation %s not started; recover_stalled will start it",
            invocation_id,
            exc_info=True,
        )


def _actor_id(actor: Any) -> Any:
    if actor is None or not getattr(actor, "is_authenticated", True):
        return None
    return getattr(actor, "pk", actor)


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
    PayloadTooLargeError) and stores nothing.
    """
    definition = registry.get(workflow_name)
    node_input = checked_input(node_input, hitl_settings.MAX_VALUE_BYTES)
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

    `actor`: the user answering (a machine's account too): the answer policy (DESIGN
    4.1) must let them answer every interrupt, else PermissionDenied. None: the system
    itself (a node, a management command), which the policy does not restrict.

    Raises UnknownInterruptError, InterruptNotPendingError, ResponseValidationError or
    MultipleInvocationsError before storing anything. An identical repeat of an accepted
    answer is a success that changes nothing.
    """
    responses = _function_response_list(responses)
    invocation_id = _accept(responses, actor)
    return _invocation(invocation_id)


@functools.cache
def _invocation_query() -> str:
    columns = ", ".join(f.column for f in Invocation._meta.concrete_fields)
    return f"SELECT {columns} FROM {Invocation._meta.db_table} WHERE id = %s"


def _invocation(invocation_id: Any) -> Invocation:
    """The invocation as it is now (a raw query: on the resume path, building the ORM
    query cost more than reading the row)."""
    key = Invocation._meta.pk.get_db_prep_value(invocation_id, connection)
    return Invocation.objects.raw(_invocation_query(), [key])[0]


@write_transaction
def _accept(responses: list[FunctionResponse], actor: Any) -> Any:
    db = store()
    ids = [r.id for r in responses]
    # The one lock order (invocation row, then its interrupts): answers racing cancel,
    # retry or the deadline sweep queue on the invocation instead of deadlocking.
    interrupts = db.lock_for_answers_sync(ids)
    _require_answerer_of_all(actor, interrupts)
    acceptance = accept_responses(
        responses,
        interrupts,
        actor=_actor_id(actor),
        now=timezone.now(),
        max_bytes=hitl_settings.MAX_RESPONSE_BYTES,
    )
    if acceptance.batch:
        db.commit_sync(acceptance.batch, savepoint=False)
        _enqueue_run(acceptance.invocation_id)
    return acceptance.invocation_id


def _require_answerer_of_all(actor: Any, interrupts: Mapping[str, Any]) -> None:
    if actor is None or not getattr(actor, "is_authenticated", False):
        return
    rows = Interrupt.objects.filter(pk__in=list(interrupts)).select_related("invocation")
    for interrupt in rows:
        _require_answerer(actor, interrupt)


def _locked_checkpoint(db: DjangoStore, invocation: Invocation | Any) -> Any:
    invocation_id = getattr(invocation, "pk", invocation)
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    if checkpoint is None:
        raise InvocationNotFoundError(invocation_id)
    return checkpoint


@write_transaction
def cancel(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Cancel: pending interrupts become cancelled, a running execution stops at its next
    checkpoint, the invocation ends CANCELLED."""
    db = store()
    checkpoint = _locked_checkpoint(db, invocation)
    db.commit_sync(cancel_batch(checkpoint, actor=_actor_id(actor), now=timezone.now()))
    return _invocation(checkpoint.invocation.id)


@write_transaction
def retry(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Re-drive a FAILED invocation: its failed node runs re-run, completed ones do not."""
    db = store()
    checkpoint = _locked_checkpoint(db, invocation)
    db.commit_sync(retry_batch(checkpoint))
    Invocation.objects.filter(pk=checkpoint.invocation.id).update(
        finished_at=None, unfinished_deliveries=0
    )
    _enqueue_run(checkpoint.invocation.id)
    return _invocation(checkpoint.invocation.id)


# A lease is live until it expires by the database's clock (not this process's).
LIVE_LEASE = Q(lease_expires_at__gte=Now()) & ~Q(lease_owner="")


@write_transaction
def fail(invocation_id: Any, error: str) -> None:
    """Mark an open invocation FAILED (a poison task, an incompatible definition).

    Not while another execution holds a live lease: that run decides the outcome (the
    invocation finishes once)."""
    db = store()
    checkpoint = _locked_checkpoint(db, invocation_id)
    record = checkpoint.invocation
    if record.status.is_final:
        return
    if Invocation.objects.filter(LIVE_LEASE, pk=record.id).exists():
        return
    record.status, record.error = NodeStatus.FAILED, error
    db.commit_sync(WriteBatch(record.id, invocation=record))


def execute(invocation_id: str) -> float | None:
    """Run the engine for an invocation until it waits or finishes (the worker's job).

    Returns None when done, or the seconds after which to try again: another run holds
    a live lease, and if that run died, its lease expires then (a redelivered message
    must not drop the work).

    Poison guard: each delivery that takes over an expired lease (a run that never
    finished: its worker died) or whose run raised counts one unfinished run; at
    HITL["MAX_DELIVERIES"] in a row the invocation fails instead of looping forever.
    Deliveries that find another run alive count nothing.
    """
    row = store().read_for_execution_sync(str(invocation_id))
    if row is None:
        return None
    workflow_name, workflow_version, deliveries = row
    if deliveries >= hitl_settings.MAX_DELIVERIES:
        fail(
            invocation_id,
            f"gave up after {deliveries} runs that never finished "
            f'(a run task that kills its worker?); HITL["MAX_DELIVERIES"] is '
            f"{hitl_settings.MAX_DELIVERIES}",
        )
        return None
    try:
        workflow = registry.for_invocation(
            workflow_name,
            workflow_version,
            lambda: NodeRun.objects.filter(invocation_id=invocation_id).values_list(
                "path", flat=True
            ),
        )
    except (DefinitionChangedError, LookupError) as exc:
        fail(invocation_id, f"{type(exc).__name__}: {exc}")
        return None
    runner = Runner(
        workflow,
        store=DjangoStore(lease_seconds=hitl_settings.LEASE_SECONDS, inline=True),
        lease_ttl=hitl_settings.LEASE_SECONDS,
        max_value_bytes=hitl_settings.MAX_VALUE_BYTES,
    )
    try:
        ran = _in_this_thread(runner.advance(str(invocation_id), wait=False))
    except Exception:
        Invocation.objects.filter(pk=invocation_id, status__in=OPEN_STATUSES).update(
            unfinished_deliveries=F("unfinished_deliveries") + 1
        )
        raise
    if not ran:
        return _lease_remaining(invocation_id)
    if deliveries:
        # A run finished and let go of the lease: the invocation is not poison.
        Invocation.objects.filter(
            pk=invocation_id, lease_owner="", unfinished_deliveries__gt=0
        ).update(unfinished_deliveries=0)
    return None


_loops = threading.local()


def _in_this_thread(coroutine: Any) -> Any:
    """Drive the engine on an event loop in this thread, the one that owns the database
    connection: its store calls and synchronous node bodies run here without a hop to
    another thread (an inline DjangoStore). The loop is kept for the thread's next run."""
    loop = getattr(_loops, "loop", None)
    if loop is not None and loop.is_running():
        # Called from a node body of a run this thread drives (eager Celery): a loop of
        # its own for the nested run.
        nested = asyncio.new_event_loop()
        try:
            return nested.run_until_complete(coroutine)
        finally:
            nested.close()
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
    return loop.run_until_complete(coroutine)


def _lease_remaining(invocation_id: Any) -> float | None:
    """Seconds until the invocation's current lease expires (None: no lease now)."""
    expires = (
        Invocation.objects.filter(pk=invocation_id, status__in=OPEN_STATUSES)
        .exclude(lease_owner="")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    if expires is None:
        return None
    return max((expires - timezone.now()).total_seconds(), 0.0)


def expire_overdue_interrupts(now: datetime | None = None) -> int:
    """Expire each pending interrupt past its deadline exactly once and apply its policy.

    Each interrupt in a transaction of its own: one that fails is logged and left for the
    next sweep, the others go on. The fail policy waits while a run holds the lease (that
    run decides the invocation's outcome; the next sweep applies it)."""
    now = now or timezone.now()
    overdue = Interrupt.objects.filter(status=InterruptStatus.PENDING, deadline__lte=now)
    expired = 0
    for interrupt_id, invocation_id in overdue.values_list("id", "invocation_id")[:500]:
        try:
            expired += _expire(interrupt_id, invocation_id, now)
        except Exception:
            logger.exception("expiring interrupt %s of invocation %s", interrupt_id, invocation_id)
    return expired


@write_transaction
def _expire(interrupt_id: str, invocation_id: Any, now: datetime) -> int:
    db = store()
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    record = checkpoint.interrupts.get(interrupt_id) if checkpoint else None
    if record is None or record.status != InterruptStatus.PENDING:
        return 0  # answered or expired meanwhile
    fails = not isinstance(record.request.on_timeout, DefaultResponse)
    if fails and Invocation.objects.filter(LIVE_LEASE, pk=invocation_id).exists():
        return 0
    db.commit_sync(expire_batch(checkpoint, interrupt_id, now))
    _enqueue_run(invocation_id)
    return 1


def stalled_invocations(now: datetime, older_than: timedelta) -> Q:
    """The open invocations nobody is running although they have work: their run died
    (its lease expired: a live run's heartbeat renews it), they were never picked up
    (PENDING or RUNNING with no lease for `older_than`), or they hold answers no pass has
    seen for `older_than`. One rule for recovery and for `hitl_status`."""
    before = now - older_than
    unleased = Q(lease_owner="") | Q(lease_expires_at__lt=Now())
    died = ~Q(lease_owner="") & Q(lease_expires_at__lt=Now())
    never_taken = Q(
        lease_owner="", updated_at__lt=before, status__in=[NodeStatus.PENDING, NodeStatus.RUNNING]
    )
    unseen_answers = unleased & Q(
        pk__in=Interrupt.objects.filter(
            consumed=False, deferred=False, status__in=ANSWERED, resolved_at__lt=before
        ).values("invocation_id")
    )
    return Q(status__in=OPEN_STATUSES) & (died | never_taken | unseen_answers)


def recover_stalled(now: datetime | None = None) -> int:
    """Re-enqueue the stalled invocations (see `stalled_invocations`). Each once until a
    run takes it (or again after HITL["STALLED_AFTER_SECONDS"], should that message be
    lost), so a backlog does not flood the broker."""
    now = now or timezone.now()
    period = timedelta(seconds=hitl_settings.STALLED_AFTER_SECONDS)
    not_recently = Q(recovery_enqueued_at__isnull=True) | Q(recovery_enqueued_at__lt=now - period)
    stalled = Invocation.objects.filter(stalled_invocations(now, period), not_recently)
    invocation_ids = set(stalled.values_list("pk", flat=True)[:1000])
    Invocation.objects.filter(pk__in=invocation_ids).update(recovery_enqueued_at=now)
    for invocation_id in invocation_ids:
        _send_run(invocation_id)
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
    store().lock_invocation_sync(invocation_id)
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


@write_transaction
def decide(interrupt_id: str, response: Any, *, actor: Any, comment: str = "") -> Decision:
    """Record `actor`'s decision on a pending interrupt; once the quorum is met (or on the
    first rejection of a quorum vote), submit the interrupt's answer in the same
    transaction.

    Raises PermissionDenied (the answer policy refuses), AlreadyDecidedError (one decision
    per person), UnknownInterruptError, InterruptNotPendingError or ResponseValidationError;
    nothing is stored then. `decision.interrupt.status` tells whether it answered.
    """
    checked_answer(None, response, hitl_settings.MAX_RESPONSE_BYTES)
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


@write_transaction
def claim(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Mark `actor` as working on a pending interrupt they may answer. Claiming one's own
    claim again changes nothing; someone else's claim raises AlreadyClaimedError (a claim
    never blocks a decision, it only tells colleagues)."""
    interrupt = _locked_interrupt(interrupt_id)
    _require_answerer(actor, interrupt)
    _require_pending(interrupt)
    if interrupt.claimed_by_id not in (None, actor.pk):
        raise AlreadyClaimedError(interrupt.pk, interrupt.claimed_by.get_username())
    if interrupt.claimed_by_id is None:
        interrupt.claimed_by, interrupt.claimed_at = actor, timezone.now()
        interrupt.save(update_fields=["claimed_by", "claimed_at"])
    return interrupt


@write_transaction
def release(interrupt_id: str, *, actor: Any) -> Interrupt:
    """Drop the claim on an interrupt: its claimer may, and so may a supervisor
    (`workflows.reassign_interrupt`). Releasing an unclaimed interrupt changes nothing."""
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


@write_transaction
def reassign(interrupt_id: str, assignees: list[str], *, actor: Any) -> Interrupt:
    """Replace who may answer a pending interrupt (an empty list: anyone with the answer
    permission), and drop its claim. Allowed to supervisors (`workflows.reassign_interrupt`)
    and to those who may answer it now. Decisions already recorded stay."""
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
