"""Signals sent after the transaction that caused them commits.

- interrupt_opened(interrupt_id, invocation_id, assignees): a node asked a question
  (`assignees` as it names them; empty: anyone the answer policy allows).
- interrupt_resolved(interrupt_id, invocation_id, status): answered, expired or cancelled.
- invocation_finished(invocation_id, status, rewound): COMPLETED, FAILED or CANCELLED;
  `rewound` True when it finishes again after a rewind changed an answer (DESIGN 3.8).
- invocation_rewound(invocation_id, interrupt_id): an answer was changed (services.rewind).
- decision_recorded(decision_id, interrupt_id): a person decided (services.decide); sent
  with send_robust, so a failing receiver never undoes or hides the decision.
- grant_changed(action, grant_id, invocation_id, path, actor_id): a grant was made
  ("grant.created"), let a dispatch pass its gate ("grant.used", with the node run's
  invocation and path) or was revoked ("grant.revoked").
- interrupt_escalated(interrupt_id, step): the sweep applied escalation step `step` (its
  index in the ladder; the step's `remind` and `assignees` say what it did).
- delegation_changed(delegation_id, action): a delegation was made ("delegation.created"),
  began ("delegation.started": the sweep saw the start of one made to start later; sent
  once per delegation) or ended ("delegation.ended").
"""

from functools import partial
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from .engine.state import WriteBatch

DELEGATION_STARTED = "delegation.started"  # delegation_changed's action for a later start

interrupt_opened = Signal()
interrupt_resolved = Signal()
invocation_finished = Signal()
invocation_rewound = Signal()
decision_recorded = Signal()
grant_changed = Signal()
interrupt_escalated = Signal()
delegation_changed = Signal()


def send_on_commit(signal: Signal, *, sender: Any, using: str | None = None, **kwargs: Any) -> None:
    """Send `signal` once the transaction on `using` commits, robustly: a receiver that
    raises is logged and cannot make a stored change look failed, nor keep the other
    on-commit work (the run's enqueue) from happening. Every signal here goes this way."""
    transaction.on_commit(
        partial(signal.send_robust, sender=sender, **kwargs), using=using, robust=True
    )


def announce_grant(
    action: str,
    grant_id: str,
    using: str,
    *,
    actor_id: Any = None,
    invocation_id: Any = None,
    path: str = "",
) -> None:
    """Queue `grant_changed` for when the transaction that made the change commits: the one
    place each grant action (grant.created, grant.used, grant.revoked) is reported."""
    send_on_commit(
        grant_changed,
        sender=WriteBatch,
        using=using,
        action=action,
        grant_id=grant_id,
        invocation_id=None if invocation_id is None else str(invocation_id),
        path=path,
        actor_id=actor_id,
    )


def announce(batch: WriteBatch, using: str) -> None:
    """Queue the signals a committed batch implies (`send_on_commit`)."""
    invocation_id = batch.invocation_id
    for record in batch.new_interrupts:
        send_on_commit(
            interrupt_opened,
            sender=WriteBatch,
            using=using,
            interrupt_id=record.id,
            invocation_id=invocation_id,
            assignees=list(record.request.assignees or ()),
        )
    for resolution in batch.resolutions:
        send_on_commit(
            interrupt_resolved,
            sender=WriteBatch,
            using=using,
            interrupt_id=resolution.interrupt_id,
            invocation_id=invocation_id,
            status=str(resolution.status),
        )
    if batch.invocation is not None and batch.invocation.status.is_final:
        send_on_commit(
            invocation_finished,
            sender=WriteBatch,
            using=using,
            invocation_id=invocation_id,
            status=str(batch.invocation.status),
            rewound=batch.invocation.rewound,
        )
