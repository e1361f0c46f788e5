"""What the Django store keeps of agent actions: grants, their uses, and effects.

Off the per-step path (a gate's grant lookup, an effect's start, a revocation), so the ORM
is fine here. `apply` writes a batch's part in the batch's own transaction; `AgentActions`
holds the store's methods for them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, F, Q, When
from django.dispatch import Signal
from django.utils import timezone

from .. import signals
from ..engine.errors import GrantUnavailableError, UnknownGrantError
from ..engine.state import EffectRecord, GrantRecord, InterruptRecord, WriteBatch
from ..engine.status import EffectStatus, GrantScope, InterruptStatus
from ..models import Effect, Grant, GrantUse, Interrupt, Invocation, live_at
from .dialect import Dialect

EFFECT_FIELDS = ["key", "status", "result", "error", "attempts", "started_at", "finished_at"]

# Sent inside the transaction that makes a grant action (grant.created, grant.used,
# grant.revoked), so that what a receiver writes (the audit trail's entry) is kept exactly
# when the action is. After commit, `signals.grant_changed` tells the world.
grant_action = Signal()


def report_grant_action(
    action: str,
    grant_id: str,
    using: str,
    *,
    actor_id: Any = None,
    invocation_id: Any = None,
    interrupt_id: str | None = None,
    path: str = "",
    reason: str = "",
) -> None:
    """The one place each grant action is reported: in its transaction, then on commit."""
    grant_action.send(
        sender=Grant,
        action=action,
        grant_id=grant_id,
        using=using,
        actor_id=actor_id,
        invocation_id=invocation_id,
        interrupt_id=interrupt_id,
        path=path,
        reason=reason,
    )
    signals.announce_grant(
        action, grant_id, using, actor_id=actor_id, invocation_id=invocation_id, path=path
    )


# What a grant's record and its row hold alike.
GRANT_FIELDS = [
    "workflow_name",
    "node_name",
    "scope_id",
    "pins",
    "expires_at",
    "uses_left",
    "revoked_at",
]


def grant_record(row: Grant) -> GrantRecord:
    return GrantRecord(
        id=row.pk,
        scope=GrantScope(row.scope),
        granted_by=row.granted_by_id,
        created_at=row.created_at,
        interrupt_id=row.interrupt_id or None,
        **{name: getattr(row, name) for name in GRANT_FIELDS},
    )


def grant_row(record: GrantRecord) -> Grant:
    return Grant(
        id=record.id,
        scope=str(record.scope),
        granted_by_id=record.granted_by,
        created_at=record.created_at or timezone.now(),
        interrupt_id=record.interrupt_id or "",
        **{name: getattr(record, name) for name in GRANT_FIELDS},
    )


def find_grants(
    using: str,
    workflow_name: str,
    node_name: str,
    scopes: Iterable[tuple[str, str]],
    now: datetime,
) -> list[GrantRecord]:
    within = Q()
    for scope, scope_id in scopes:
        within |= Q(scope=str(scope), scope_id=scope_id)
    if not within:
        return []
    rows = Grant.objects.using(using).filter(
        within, live_at(now), workflow_name=workflow_name, node_name=node_name
    )
    return [grant_record(row) for row in rows.order_by("created_at", "pk")]


def record_grant(using: str, grant: GrantRecord) -> None:
    Grant.objects.using(using).bulk_create([grant_row(grant)], ignore_conflicts=True)


def revoke_grant(using: str, grant_id: str, at: datetime) -> GrantRecord:
    with transaction.atomic(using=using):
        row = Grant.objects.using(using).select_for_update().filter(pk=grant_id).first()
        if row is None:
            raise UnknownGrantError(grant_id)
        if row.revoked_at is None:
            row.revoked_at = at
            row.save(update_fields=["revoked_at"])
    return grant_record(row)


def effect_record(row: Effect) -> EffectRecord:
    return EffectRecord(
        invocation_id=str(row.invocation_id),
        path=row.path,
        name=row.name,
        key=row.key,
        status=EffectStatus(row.status),
        result=row.result,
        error=row.error or None,
        attempts=row.attempts,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


def load_effects(using: str, invocation_id: Any, path: str) -> dict[str, EffectRecord]:
    rows = Effect.objects.using(using).filter(invocation_id=invocation_id, path=path)
    return {row.name: effect_record(row) for row in rows}


def invocation_effects(using: str, invocation_id: Any) -> list[EffectRecord]:
    rows = Effect.objects.using(using).filter(invocation_id=invocation_id).order_by("id")
    return [effect_record(row) for row in rows]


def has_actions(batch: WriteBatch) -> bool:
    return bool(
        batch.effects
        or batch.new_grants
        or batch.grant_uses
        or batch.interrupt_updates
        or batch.revoke_grants_of
        or batch.reopens
    )


def apply(batch: WriteBatch, using: str) -> None:
    """Write the batch's effects, new grants and grant uses, in the caller's transaction;
    GrantUnavailableError (rolling it back) when a use finds its grant no longer live."""
    if batch.effects:
        latest = {(e.path, e.name): e for e in batch.effects}  # the last record of each
        rows = [
            Effect(
                invocation_id=e.invocation_id,
                path=e.path,
                name=e.name,
                key=e.key,
                status=str(e.status),
                result=e.result,
                error=e.error or "",
                attempts=e.attempts,
                started_at=e.started_at,
                finished_at=e.finished_at,
            )
            for e in latest.values()
        ]
        Effect.objects.using(using).bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["invocation", "path", "name"],
            update_fields=EFFECT_FIELDS,
        )
    if batch.reopens:  # a rewind: finished no longer, and no stale lease writes after it
        Invocation.objects.using(using).filter(pk=batch.invocation_id).update(
            rewound=True,
            finished_at=None,
            unfinished_deliveries=0,
            lease_owner="",
            lease_expires_at=None,
        )
    if batch.interrupt_updates:
        _rewrite_interrupts(batch.interrupt_updates, using)
    if batch.revoke_grants_of:
        _revoke_grants_of(batch.revoke_grants_of, using)
    if batch.new_grants:
        _create_grants(batch.new_grants, using)
    if batch.grant_uses:
        _use_grants(batch, using)


def _rewrite_interrupts(records: list[InterruptRecord], using: str) -> None:
    """A rewind's interrupt rows (DESIGN 3.8): re-answered, superseded or reopened. A
    question that stops being pending stops its claim, escalation and due date too."""
    for record in records:
        changes: dict[str, Any] = {
            "status": str(record.status),
            "response": record.response,
            "consumed": record.consumed,
            "deferred": record.deferred,
            "resolved_at": record.resolved_at,
            "round": record.round,
        }
        if record.resolved_by is not None:
            changes["resolved_by_id"] = record.resolved_by
        if record.status != InterruptStatus.PENDING:
            changes.update(claimed_by=None, claimed_at=None, next_escalation_at=None)
        Interrupt.objects.using(using).filter(pk=record.id).update(**changes)


def _revoke_grants_of(interrupt_ids: set[str], using: str) -> None:
    """Revoke the grants the answers to these questions made (a rewound approval)."""
    live = Grant.objects.using(using).filter(
        interrupt_id__in=sorted(interrupt_ids), revoked_at__isnull=True
    )
    now = timezone.now()
    for grant_id, interrupt_id in live.values_list("id", "interrupt_id"):
        Grant.objects.using(using).filter(pk=grant_id).update(revoked_at=now)
        report_grant_action(
            "grant.revoked",
            grant_id,
            using,
            interrupt_id=interrupt_id,
            reason="the approval that made it was changed (rewind)",
        )


def _create_grants(grants: list[GrantRecord], using: str) -> None:
    known = set(
        Grant.objects.using(using)
        .filter(pk__in=[g.id for g in grants])
        .values_list("pk", flat=True)
    )
    fresh = {g.id: g for g in grants if g.id not in known}  # once per answer
    Grant.objects.using(using).bulk_create([grant_row(g) for g in fresh.values()])
    for grant in fresh.values():
        report_grant_action(
            "grant.created",
            grant.id,
            using,
            actor_id=grant.granted_by,
            interrupt_id=grant.interrupt_id,
        )


def _use_grants(batch: WriteBatch, using: str) -> None:
    counts = Counter(use.grant_id for use in batch.grant_uses)
    at = min(use.at for use in batch.grant_uses)
    for grant_id, count in sorted(counts.items()):
        taken = (
            Grant.objects.using(using)
            .filter(live_at(at), Q(uses_left__isnull=True) | Q(uses_left__gte=count), pk=grant_id)
            .update(
                uses_left=Case(
                    When(uses_left__isnull=True, then=None), default=F("uses_left") - count
                )
            )
        )
        if not taken:
            raise GrantUnavailableError(grant_id)
    GrantUse.objects.using(using).bulk_create(
        [
            GrantUse(
                grant_id=use.grant_id,
                invocation_id=use.invocation_id,
                path=use.path,
                used_at=use.at,
            )
            for use in batch.grant_uses
        ]
    )
    for use in batch.grant_uses:
        report_grant_action(
            "grant.used", use.grant_id, using, invocation_id=use.invocation_id, path=use.path
        )


class AgentActions:
    """The grant and effect methods of the Store protocol, for DjangoStore (which gives
    `using`, `dialect` and `_call`)."""

    using: str
    dialect: Dialect

    async def _call(self, func: Any, *args: Any) -> Any:
        raise NotImplementedError

    def find_grants_sync(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: Any
    ) -> list[GrantRecord]:
        return find_grants(self.using, workflow_name, node_name, scopes, now)

    def load_effects_sync(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        return load_effects(self.using, self.dialect.pk(invocation_id), path)

    async def find_grants(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: Any
    ) -> list[GrantRecord]:
        return await self._call(self.find_grants_sync, workflow_name, node_name, list(scopes), now)

    async def record_grant(self, grant: GrantRecord) -> None:
        await self._call(record_grant, self.using, grant)

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord:
        return await self._call(revoke_grant, self.using, grant_id, at)

    async def load_effects(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        return await self._call(self.load_effects_sync, invocation_id, path)
