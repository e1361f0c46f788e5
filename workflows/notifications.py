"""Notifiers (DESIGN 4.3): who is told when a question opens, is reminded, escalated,
delegated or decided.

`HITL["NOTIFIERS"]` lists notifier classes by dotted path. A notifier is a class whose
`notify(event, interrupt, **context)` is called with `event` one of NOTIFY_EVENTS and the
Interrupt; the context holds `step` (reminded, escalated: the index in its ladder),
`status` (decided: resolved, expired or cancelled) or `delegation` (delegated: the
Delegation, whose delegate is told about the delegator's question). A notifier may
define `enabled()`: when it returns False the notifier is skipped; `events`, the events
it is told about (every one when it has none); and `assigned_only = True` when it tells
only a question's assignees (an opened question assigned to no one is not its concern).
When no enabled notifier wants an event nothing is enqueued: no task, no read, no
NotificationAttempt.

Each event is one Celery task (workflows.tasks.notify), enqueued after the transaction
commits. The task calls every notifier for every question the event concerns and records
each call as a NotificationAttempt. A call that raises is retried after a backoff, alone:
the others are not called again. A notifier that reached some of its recipients raises
`Undelivered(detail, **retry_with)` so that its retry gets `retry_with` as extra context
(the recipients left) instead of repeating everything. Neither a failing notifier nor a
failure to enqueue reaches the write that caused the event: both are logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import dispatch, signals
from .audit import actions
from .conf import hitl_settings
from .engine.status import InterruptStatus
from .expressions import HasAnyElement
from .models import NOTIFY_EVENTS, Delegation, Interrupt, NotificationAttempt
from .policy import answer_policy
from .principals import assignee_names

logger = logging.getLogger(__name__)

OPENED, REMINDED, ESCALATED, DELEGATED, DECIDED, SUPERSEDED = NOTIFY_EVENTS
ERROR_CHARS = 2000  # kept of a failure's message in its NotificationAttempt


class Undelivered(Exception):
    """Raised by a notifier that reached some recipients and not others: `detail` says
    which failed and why, and its retry is called with `retry_with` added to the context
    (values JSON can carry, e.g. `only=["7"]`, the user ids left)."""

    def __init__(self, detail: str, **retry_with: Any) -> None:
        super().__init__(detail)
        self.retry_with = retry_with


def notifier_path(notifier: Any) -> str:
    cls = type(notifier)
    return f"{cls.__module__}.{cls.__qualname__}"


def active_notifiers(event: str | None = None, *, unassigned: bool = False) -> dict[str, Any]:
    """An instance of each notifier HITL["NOTIFIERS"] names that is enabled (and wants
    `event`, when given; `unassigned`: about a question assigned to no one), by path."""
    instances = (cls() for cls in hitl_settings.NOTIFIERS)
    return {
        notifier_path(notifier): notifier
        for notifier in instances
        if getattr(notifier, "enabled", lambda: True)()
        and (event is None or event in getattr(notifier, "events", NOTIFY_EVENTS))
        and not (unassigned and getattr(notifier, "assigned_only", False))
    }


def backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1 for the first)."""
    return float(hitl_settings.NOTIFY_BACKOFF_SECONDS * 2 ** (attempt - 1))


# --- enqueueing (the write path's side: never raises) ---------------------------------------


def enqueue(
    event: str, interrupt_ids: list[str], *, unassigned: bool = False, **context: Any
) -> None:
    """Publish one notify task for `event` once the current transaction commits (at once
    outside one), when a notifier wants it (`unassigned`: the questions are assigned to no
    one). `context` must be JSON: it travels through the broker."""
    # robust: another on-commit callback that fails does not skip this one.
    publish = partial(_publish, event, interrupt_ids, context, unassigned)
    transaction.on_commit(publish, robust=True)


def _publish(
    event: str, interrupt_ids: list[str], context: dict[str, Any], unassigned: bool
) -> None:
    try:
        if not active_notifiers(event, unassigned=unassigned):
            return
        dispatch.send(
            dispatch.NOTIFY,
            [event, interrupt_ids, context],
            retry=True,
            retry_policy=dispatch.PUBLISH_RETRY_POLICY,
        )
    except Exception:  # the broker is down, or a notifier cannot be imported
        logger.warning(
            "notifications of %s for %s not sent", event, interrupt_ids or context, exc_info=True
        )


def step_event(interrupt_id: str, step: int) -> str | None:
    """What escalation step `step` of the question did, to its notifiers: "escalated"
    when it replaced the assignees, "reminded" when it only reminded them, None when
    neither (or the question or its step is gone)."""
    ladder = Interrupt.objects.filter(pk=interrupt_id).values_list("escalation", flat=True).first()
    if not ladder or not 0 <= step < len(ladder):
        return None
    applied = ladder[step]  # Escalation.to_dict()
    if applied.get("assignees") is not None:
        return ESCALATED
    return REMINDED if applied.get("remind") else None


def _guarded(receiver: Any) -> Any:
    def guarded(*args: Any, **kwargs: Any) -> None:
        try:
            receiver(*args, **kwargs)
        except Exception:
            logger.exception("notification receiver %s failed", receiver.__name__)

    guarded.__name__ = receiver.__name__
    return guarded


@_guarded
def on_interrupt_opened(
    sender: Any, interrupt_id: str, assignees: list[str] | None = None, **kwargs: Any
) -> None:
    # (`assignees` None: a sender that does not say; the notifiers are asked.)
    enqueue(OPENED, [interrupt_id], unassigned=assignees == [])


@_guarded
def on_interrupt_escalated(sender: Any, interrupt_id: str, step: int, **kwargs: Any) -> None:
    event = step_event(interrupt_id, step)
    if event is not None:
        enqueue(event, [interrupt_id], step=step)


@_guarded
def on_interrupt_resolved(sender: Any, interrupt_id: str, status: str, **kwargs: Any) -> None:
    enqueue(DECIDED, [interrupt_id], status=status)


@_guarded
def on_delegation_changed(sender: Any, delegation_id: Any, action: str, **kwargs: Any) -> None:
    # Created: told at once when it is active (delivery finds nothing for one that starts
    # later); started: the sweep saw a later start come.
    if action in (actions.DELEGATION_CREATED, signals.DELEGATION_STARTED):
        enqueue(DELEGATED, [], delegation_id=delegation_id)


def connect() -> None:
    """Connect the receivers (WorkflowsConfig.ready)."""
    receivers = [
        (signals.interrupt_opened, on_interrupt_opened),
        (signals.interrupt_escalated, on_interrupt_escalated),
        (signals.interrupt_resolved, on_interrupt_resolved),
        (signals.delegation_changed, on_delegation_changed),
    ]
    for signal, receiver in receivers:
        signal.connect(receiver, dispatch_uid=f"hitl-notify-{receiver.__name__}")


# --- delivering (the task's side) -----------------------------------------------------------


def delegated_questions(delegation: Delegation) -> list[str]:
    """The pending questions of an active delegation's delegator that it hands over: those
    assigned to the delegator, directly or by group, in its workflows (all when empty),
    that the answer policy lets the delegate answer (not, say, a four-eyes question of an
    invocation the delegate started: its text is not theirs to read)."""
    now = timezone.now()
    if delegation.ended_at is not None or not delegation.starts_at <= now < delegation.ends_at:
        return []
    pending = Interrupt.objects.filter(
        HasAnyElement("assignees", assignee_names(delegation.delegator)),
        status=InterruptStatus.PENDING,
    )
    if delegation.workflows:
        pending = pending.filter(workflow_name__in=delegation.workflows)
    answerable = answer_policy().answerable(delegation.delegate, pending)
    return list(answerable.order_by("created_at").values_list("pk", flat=True))


def deliver(
    event: str,
    interrupt_ids: list[str],
    context: dict[str, Any],
    retrying: Iterable[list[Any]] | None,
    *,
    attempt: int,
) -> list[list[Any]]:
    """Call the notifiers about `event` and record each call as attempt number `attempt`.
    First (`retrying` None) every enabled notifier for each question; on a retry only the
    calls `retrying` lists, as [interrupt id, notifier path, extra context]. Returns the
    calls that failed, in that form."""
    notifiers = active_notifiers(event)
    arguments = dict(context)
    delegation_id = arguments.pop("delegation_id", None)
    if delegation_id is not None:
        delegation = Delegation.objects.select_related("delegator", "delegate").filter(
            pk=delegation_id
        )
        arguments["delegation"] = found = delegation.first()
        if found is None:
            return []
        interrupt_ids = delegated_questions(found)
        if retrying is not None:  # only those the delegate may still answer
            retrying = [call for call in retrying if call[0] in interrupt_ids]
    calls: list[tuple[str, str, dict[str, Any]]] = (
        [(pk, path, extra) for pk, path, extra in retrying]
        if retrying is not None
        else [(pk, path, {}) for pk in interrupt_ids for path in notifiers]
    )
    interrupts = Interrupt.objects.select_related("invocation").in_bulk({pk for pk, _, _ in calls})
    failed = []
    for interrupt_id, path, extra in calls:
        interrupt, notifier = interrupts.get(interrupt_id), notifiers.get(path)
        if interrupt is None or notifier is None:  # deleted, or switched off since
            continue
        error = _call(notifier, event, interrupt, {**arguments, **extra})
        NotificationAttempt.objects.create(
            interrupt=interrupt,
            event=event,
            notifier=path,
            attempt=attempt,
            succeeded=error is None,
            error="" if error is None else error[0][:ERROR_CHARS],
        )
        if error is not None:
            failed.append([interrupt_id, path, {**extra, **error[1]}])
    return failed


def _call(
    notifier: Any, event: str, interrupt: Interrupt, context: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """None when the notifier succeeded; else what failed and the context to retry with."""
    try:
        notifier.notify(event, interrupt, **context)
    except Undelivered as exc:
        failure, retry_with = str(exc), exc.retry_with
    except Exception as exc:
        failure, retry_with = f"{type(exc).__name__}: {exc}", {}
    else:
        return None
    logger.warning(
        "notifier %s failed on %s of %s: %s",
        notifier_path(notifier),
        event,
        interrupt.pk,
        failure,
    )
    return failure, retry_with
