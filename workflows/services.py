"""The one write path, from the request side: start, submit_function_responses, cancel,
retry, and the people's decisions (`decisions`) and claims. Each change is one transaction
(`transactions`); Celery work is enqueued on commit (`dispatch`); bad input raises a named
error and changes nothing. The worker's side (execute, fail, the sweeps) lives in
`worker` and is re-exported here, as are the escalation sweep (`people.escalation`) and
the delegations (`people.out_of_office`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, cast

from django.db import IntegrityError, connection
from django.utils import timezone

from .answers import accept, actor_id
from .arguments import (
    function_response_list,
)
from .audit import actions, trail
from .audit.canonical import canonical_json, sha256_hex
from .claims import claim, reassign, release
from .conf import hitl_settings
from .decisions import decide, signing_challenge
from .dispatch import enqueue_run
from .engine.errors import IdempotencyKeyReusedError
from .engine.transitions import (
    cancel_batch,
    checked_input,
    retry_batch,
)
from .models import Invocation, Session
from .people.escalation import escalate_interrupts
from .people.out_of_office import announce_delegations, delegate, end_delegation
from .policy import (
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    require_control,
    require_person,
)
from .registry import registry
from .rewinds import plan_rewind, reopen, rewind
from .sessions import open_session
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
    "plan_rewind",
    "reassign",
    "recover_stalled",
    "release",
    "reopen",
    "retry",
    "rewind",
    "signing_challenge",
    "start",
    "submit_function_responses",
]


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
        session = Session.objects.create(created_by_id=actor_id(user))
    invocation = Invocation.objects.create(
        session=session,
        workflow_name=definition.name,
        workflow_version=definition.version,
        input=node_input,
        started_by_id=actor_id(user),
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
    invocation_id = accept(responses, actor)
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
def cancel(invocation: Invocation | Any, *, actor: Any = None) -> Invocation:
    """Cancel: pending interrupts become cancelled, a running execution stops at its next
    checkpoint, the invocation ends CANCELLED. A person needs
    `actor.has_perm("workflows.cancel_invocation", invocation)` (the model permission, or
    having started it), else PermissionDenied."""
    require_person(actor)
    db = store()
    checkpoint = locked_checkpoint(db, invocation)
    require_control(actor, CANCEL_PERMISSION, invocation)
    batch = cancel_batch(checkpoint, actor=actor_id(actor), now=timezone.now())
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
