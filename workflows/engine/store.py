"""The store protocol (what the engine needs from persistence) and InMemoryStore."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from .errors import (
    DuplicateInterruptError,
    GrantUnavailableError,
    InterruptNotPendingError,
    InterruptSupersededError,
    InvocationCancelledError,
    InvocationFinishedError,
    InvocationNotFoundError,
    LeaseLostError,
    UnknownGrantError,
)
from .events import Event, RequestInput
from .state import (
    Checkpoint,
    EffectRecord,
    GrantRecord,
    GrantUse,
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    RewindReads,
    WriteBatch,
    copied,
)
from .status import InterruptStatus, NodeStatus

LEASE_TTL = 60.0  # seconds an execution lease lasts without a commit renewing it


class Store(Protocol):
    """Persistence for the engine. Reads are per invocation or per interrupt id, never
    proportional to a session's history; every write is one atomic `commit`."""

    async def load_checkpoint(self, invocation_id: str) -> Checkpoint | None:
        """The invocation, its node runs and its open (pending or unconsumed) interrupts."""

    async def load_interrupts(self, ids: Iterable[str]) -> dict[str, InterruptRecord]:
        """The interrupt rows with these ids (any status, any invocation)."""

    async def load_events(self, invocation_id: str) -> list[Event]:
        """The invocation's events, in order."""

    async def commit(self, batch: WriteBatch) -> bool:
        """Apply the batch atomically. Raise InterruptNotPendingError when a resolution
        finds its interrupt no longer pending, DuplicateInterruptError when a new interrupt
        id exists, InvocationCancelledError when the invocation was cancelled meanwhile,
        LeaseLostError when `batch.lease_owner` no longer holds the lease,
        GrantUnavailableError when a grant use finds its grant no longer live (at the
        use's time); in each case nothing of the batch is applied. With
        `batch.release_lease`, give the lease back and return whether work remains (as
        `release_lease` does); else return False."""

    async def acquire_lease(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        """Take the invocation's execution lease and return its checkpoint; None when
        another live owner holds the lease. Raise InvocationNotFoundError when unknown."""

    async def release_lease(self, invocation_id: str, owner: str) -> bool:
        """Give the lease back; return True when the invocation is still open and holds
        answers no pass has seen (they arrived while this run held the lease)."""

    # -- grants and effects (agent actions) ----------------------------------------------
    async def find_grants(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: datetime
    ) -> list[GrantRecord]:
        """The gate's grants live at `now` in any of these (scope, scope_id) pairs, oldest
        first (one read; the engine checks their pins)."""

    async def record_grant(self, grant: GrantRecord) -> None:
        """Store a grant made outside a run (one whose id exists is left as it is)."""

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord:
        """Mark the grant revoked at `at` (kept as it is when revoked already) and return
        it; UnknownGrantError when there is none."""

    async def load_effects(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        """{name: record} of the effects of the node run at `path`."""

    async def load_rewind_reads(self, invocation_id: str, interrupt_id: str) -> RewindReads:
        """What a rewind of `interrupt_id` reads (RewindReads): the checkpoint with every
        node run loaded, every question and effect record of the invocation, and the
        position among its events of the last user event answering `interrupt_id`."""


class OptionalStoreCapabilities(Protocol):
    """What a store may offer besides `Store`; the engine looks each up on the store
    (getattr) and does without when it is missing."""

    async def load_outputs(self, invocation_id: str, parent_path: str) -> dict[str, Any]:
        """{path: output} of the COMPLETED children of the node run at `parent_path`.
        Required from a store whose `acquire_lease` leaves completed node runs' inputs
        and outputs out (NOT_LOADED): a re-running parent that reuses a child fetches
        its output with it."""

    async def check_assignees(self, invocation_id: str, requests: list[RequestInput]) -> None:
        """Raise ValueError naming the first request whose quorum the users its groups and
        named users hold cannot reach (the asking node fails with it). For a store that
        knows who is in a group; the engine itself counts a list of named users."""

    async def renew_lease(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """Extend `owner`'s lease by `ttl` from now; False when it is lost (the run then
        stops before its next write), None when it cannot tell now (asked again at the
        next beat). Offered: the engine calls it every third of the lease length while
        node bodies run."""

    def keep_alive(
        self, invocation_id: str, owner: str, ttl: float, on_lost: Callable[[], None]
    ) -> AbstractContextManager[None]:
        """Renew `owner`'s lease from a thread of the store's own while the context is
        open, calling `on_lost` (from that thread) when the lease is lost. For a store
        whose synchronous work blocks the engine's event loop, where `renew_lease` timers
        on the loop would not fire; preferred to `renew_lease` when both are offered."""

    async def run_sync(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a synchronous node body (or a synchronous call of one) where the store
        allows blocking work, e.g. in the thread that owns its database connection.
        Without it synchronous node code runs inline on the event loop."""

    async def commit_then_call(
        self,
        batch: WriteBatch,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """`commit(batch)` then `func(*args, **kwargs)` as `run_sync` would, in one trip
        to the store's thread; func's result. Without it the engine commits, then calls
        `run_sync`."""

    def commit_sync(self, batch: WriteBatch, *, savepoint: bool = True) -> bool:
        """`commit`, called from synchronous node code in the thread the store runs it in
        (`ctx.effect_sync` records an effect's start with it); inside a caller's
        transaction, as a savepoint unless `savepoint` is False (a store without
        transactions has nothing to do with it). Without it `effect_sync` raises
        TypeError: an async node uses `await ctx.effect(...)`."""

    def load_effects_sync(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        """`load_effects` from synchronous node code, as `commit_sync`."""


def copy_node_run(state: NodeRunState) -> NodeRunState:
    """A copy of `state` sharing no set or dict with it."""
    return copied(
        state, interrupt_ids=set(state.interrupt_ids), resume_inputs=dict(state.resume_inputs)
    )


def check_batch(
    batch: WriteBatch,
    invocation: InvocationRecord | None,
    interrupts: dict[str, InterruptRecord],
) -> None:
    """The conditions every store checks before applying a batch (see Store.commit)."""
    cancelling = batch.invocation is not None and batch.invocation.status == NodeStatus.CANCELLED
    if invocation is not None and invocation.status == NodeStatus.CANCELLED and not cancelling:
        raise InvocationCancelledError(f"invocation {batch.invocation_id} was cancelled")
    if invocation is not None and invocation.status.is_final and batch.lease_owner is not None:
        # No write of a run changes a final status.
        raise InvocationFinishedError(f"invocation {batch.invocation_id} is {invocation.status}")
    for resolution in batch.resolutions:
        current = interrupts.get(resolution.interrupt_id)
        if current is not None and current.status == InterruptStatus.SUPERSEDED:
            raise InterruptSupersededError(resolution.interrupt_id)
        if current is None or current.status != InterruptStatus.PENDING:
            status = current.status if current else "missing"
            raise InterruptNotPendingError(resolution.interrupt_id, status)
    for record in batch.new_interrupts:
        held = interrupts.get(record.id)
        if held is not None and held.status != InterruptStatus.SUPERSEDED:
            raise DuplicateInterruptError(record.id, f"{held.path} of {held.invocation_id}")


class InMemoryStore:
    """A Store in plain dicts, for tests, benchmarks and embedding without a database."""

    def __init__(self) -> None:
        self.invocations: dict[str, InvocationRecord] = {}
        self.node_runs: dict[str, dict[str, NodeRunState]] = {}
        self.events: dict[str, list[Event]] = {}
        self.interrupts: dict[str, InterruptRecord] = {}
        self._open_interrupts: dict[str, set[str]] = {}
        self._leases: dict[str, tuple[str, float]] = {}  # owner, expiry (monotonic)
        self._lease_ttls: dict[str, float] = {}
        self.grants: dict[str, GrantRecord] = {}
        self.grant_uses: list[GrantUse] = []
        self.effects: dict[tuple[str, str, str], EffectRecord] = {}  # (invocation, path, name)

    async def load_checkpoint(self, invocation_id: str) -> Checkpoint | None:
        invocation = self.invocations.get(invocation_id)
        if invocation is None:
            return None
        runs = self.node_runs[invocation_id]
        return self._checkpoint(invocation, {path: copy_node_run(s) for path, s in runs.items()})

    def _checkpoint(
        self, invocation: InvocationRecord, node_runs: dict[str, NodeRunState]
    ) -> Checkpoint:
        return Checkpoint(
            invocation=copied(invocation),
            node_runs=node_runs,
            interrupts={
                i: copied(self.interrupts[i]) for i in self._open_interrupts[invocation.id]
            },
        )

    async def load_interrupts(self, ids: Iterable[str]) -> dict[str, InterruptRecord]:
        return {i: copied(self.interrupts[i]) for i in ids if i in self.interrupts}

    async def load_events(self, invocation_id: str) -> list[Event]:
        return list(self.events.get(invocation_id, ()))

    async def commit(self, batch: WriteBatch) -> bool:
        return self.commit_sync(batch)

    def commit_sync(self, batch: WriteBatch, *, savepoint: bool = True) -> bool:
        invocation_id = batch.invocation_id
        check_batch(batch, self.invocations.get(invocation_id), self.interrupts)
        for use in batch.grant_uses:
            grant = self.grants.get(use.grant_id)
            if grant is None or not grant.is_live(use.at):
                raise GrantUnavailableError(use.grant_id)
        if batch.lease_owner is not None:
            holder = self._leases.get(invocation_id)
            if holder is not None and holder[0] != batch.lease_owner:
                raise LeaseLostError(f"invocation {invocation_id} is leased to another run")
            ttl = self._lease_ttls.get(invocation_id, LEASE_TTL)
            self._leases[invocation_id] = (batch.lease_owner, time.monotonic() + ttl)
        if batch.invocation is not None:
            self.invocations[invocation_id] = copied(batch.invocation)
        if invocation_id not in self.node_runs:
            self.node_runs[invocation_id] = {}
            self.events[invocation_id] = []
            self._open_interrupts[invocation_id] = set()
        # Kept as given: the engine builds a new state for each save and never changes
        # one it saved or was handed (a caller of commit hands its batch over).
        self.node_runs[invocation_id].update(batch.node_runs)
        self.events[invocation_id].extend(batch.events)
        for record in batch.new_interrupts:
            self.interrupts[record.id] = copied(record)
            self._open_interrupts[invocation_id].add(record.id)
        for record in batch.interrupt_updates:
            self.interrupts[record.id] = copied(record)
            if record.status == InterruptStatus.PENDING or record.holds_answer:
                self._open_interrupts[invocation_id].add(record.id)
            else:
                self._open_interrupts[invocation_id].discard(record.id)
        for resolution in batch.resolutions:
            record = self.interrupts[resolution.interrupt_id]
            record.status = resolution.status
            record.response = resolution.response
            record.resolved_by = resolution.actor
            record.resolved_at = resolution.at
            if not record.holds_answer:
                self._open_interrupts[record.invocation_id].discard(record.id)
        for interrupt_id in batch.consumed:
            answered = self.interrupts.get(interrupt_id)
            if answered is not None and answered.status != InterruptStatus.PENDING:
                answered.consumed = True
                self._open_interrupts[answered.invocation_id].discard(interrupt_id)
        for interrupt_id in batch.deferred:
            answered = self.interrupts.get(interrupt_id)
            if answered is not None and answered.holds_answer:
                answered.deferred = True
        self._apply_agent_actions(batch)
        if batch.release_lease and batch.lease_owner is not None:
            return self._release_lease(invocation_id, batch.lease_owner)
        return False

    def _apply_agent_actions(self, batch: WriteBatch) -> None:
        for effect in batch.effects:
            self.effects[effect.invocation_id, effect.path, effect.name] = copied(effect)
        for grant in batch.new_grants:
            self.grants.setdefault(grant.id, copied(grant))
        for grant in self.grants.values():
            if grant.interrupt_id in batch.revoke_grants_of and grant.revoked_at is None:
                grant.revoked_at = datetime.now(UTC)
        for use in batch.grant_uses:
            grant = self.grants[use.grant_id]
            if grant.uses_left is not None:
                grant.uses_left -= 1
            self.grant_uses.append(copied(use))

    async def acquire_lease(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        if invocation_id not in self.invocations:
            raise InvocationNotFoundError(invocation_id)
        now = time.monotonic()
        holder = self._leases.get(invocation_id)
        if holder is not None and holder[0] != owner and holder[1] > now:
            return None
        self._leases[invocation_id] = (owner, now + ttl)
        self._lease_ttls[invocation_id] = ttl
        # The node runs as kept, uncopied: the engine only reads a leased checkpoint's
        # node runs (it saves new ones), and a commit replaces a kept one, never changes it.
        return self._checkpoint(
            self.invocations[invocation_id], dict(self.node_runs[invocation_id])
        )

    async def renew_lease(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        holder = self._leases.get(invocation_id)
        if holder is None or holder[0] != owner or self.invocations[invocation_id].status.is_final:
            return False
        self._leases[invocation_id] = (owner, time.monotonic() + ttl)
        return True

    async def release_lease(self, invocation_id: str, owner: str) -> bool:
        return self._release_lease(invocation_id, owner)

    def _release_lease(self, invocation_id: str, owner: str) -> bool:
        if self._leases.get(invocation_id, (None,))[0] == owner:
            del self._leases[invocation_id]
        if self.invocations[invocation_id].status.is_final:
            return False
        return any(
            self.interrupts[i].awaits_pass for i in self._open_interrupts.get(invocation_id, ())
        )

    async def find_grants(
        self, workflow_name: str, node_name: str, scopes: Iterable[tuple[str, str]], now: datetime
    ) -> list[GrantRecord]:
        wanted = set(scopes)
        return [
            copied(grant)
            for grant in self.grants.values()
            if grant.workflow_name == workflow_name
            and grant.node_name == node_name
            and (grant.scope, grant.scope_id) in wanted
            and grant.is_live(now)
        ]

    async def record_grant(self, grant: GrantRecord) -> None:
        self.grants.setdefault(grant.id, copied(grant))

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord:
        grant = self.grants.get(grant_id)
        if grant is None:
            raise UnknownGrantError(grant_id)
        if grant.revoked_at is None:
            grant.revoked_at = at
        return copied(grant)

    async def load_effects(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        return self.load_effects_sync(invocation_id, path)

    def load_effects_sync(self, invocation_id: str, path: str) -> dict[str, EffectRecord]:
        return {
            name: copied(effect)
            for (invocation, at_path, name), effect in self.effects.items()
            if invocation == invocation_id and at_path == path
        }

    async def load_rewind_reads(self, invocation_id: str, interrupt_id: str) -> RewindReads:
        invocation = self.invocations[invocation_id]
        runs = self.node_runs[invocation_id]
        position = None
        for index, event in enumerate(self.events[invocation_id]):
            if any(r.id == interrupt_id for r in event.function_responses):
                position = index
        return RewindReads(
            checkpoint=self._checkpoint(
                invocation, {path: copy_node_run(s) for path, s in runs.items()}
            ),
            questions={
                i: copied(r) for i, r in self.interrupts.items() if r.invocation_id == invocation_id
            },
            effects=[copied(e) for (at, _, _), e in self.effects.items() if at == invocation_id],
            answer_position=position,
        )
