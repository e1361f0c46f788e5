"""Persistent state shapes: what a store keeps and what one write batch carries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from operator import attrgetter
from typing import Any, TypeVar

from .events import Event, RequestInput
from .status import EffectStatus, GrantScope, InterruptStatus, NodeStatus


class _NotLoaded:
    """The stored value a store left out of a checkpoint (see NOT_LOADED)."""

    def __repr__(self) -> str:
        return "NOT_LOADED"


Record = TypeVar("Record")


_field_values: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def copied(record: Record, **changes: Any) -> Record:
    """A shallow copy of a state dataclass (every one has two fields or more) with
    `changes`: its __init__ called with the fields' values in order. dataclasses.replace
    passes them by name after checking each field, a cost that shows on the per-node
    path."""
    cls = type(record)
    values = _field_values.get(cls)
    if values is None:
        values = _field_values[cls] = attrgetter(*(f.name for f in fields(cls)))  # type: ignore[arg-type]
    clone = cls(*values(record))
    for name, value in changes.items():
        setattr(clone, name, value)
    return clone


# In the checkpoint a lease hands to a run, a store may leave out what a run never needs
# of a COMPLETED node run: its input, and its output until a re-running parent reuses it
# (Execution.load_outputs then fetches the outputs of that parent's completed children).
NOT_LOADED: Any = _NotLoaded()


@dataclass(slots=True)
class NodeRunState:
    """The checkpoint of one node run, keyed by (invocation, path)."""

    status: NodeStatus
    run_id: int
    output: Any = None
    interrupt_ids: set[str] = field(default_factory=set)
    attempt: int = 1
    name: str = ""
    parent_path: str = ""
    input: Any = None
    route: str | None = None
    resume_inputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    # What its approval gate decided (gates.GateOutcome as a dict), kept so that every
    # re-execution of the run reuses it: None until the gate decided (or for no gate).
    gate: dict[str, Any] | None = None
    # What dispatched it (DESIGN 3.8): the path of the run whose output triggered it, None
    # when START, a dynamic parent or a parallel worker did; a join run's is
    # {predecessor name: path}. LINEAGE_UNRECORDED on runs stored before lineage was.
    triggered_by: str | dict[str, str] | None = None


# The lineage of a node run stored before the engine recorded it: a rewind refuses.
LINEAGE_UNRECORDED = "?"


@dataclass(slots=True)
class InvocationRecord:
    id: str
    workflow_name: str
    status: NodeStatus = NodeStatus.PENDING
    input: Any = None
    output: Any = None
    error: str | None = None
    session_id: str | None = None
    # An answer of it was changed (DESIGN 3.8): its next finish is a rewound outcome.
    rewound: bool = False


@dataclass(slots=True)
class InterruptRecord:
    """The index row of one interrupt: routes an answer to its invocation in O(1)."""

    id: str
    invocation_id: str
    workflow_name: str
    path: str
    run_id: int
    request: RequestInput
    status: InterruptStatus = InterruptStatus.PENDING
    response: Any = None
    consumed: bool = False
    # Answered, but the last pass did not reach the node run that owns it (see
    # WriteBatch.deferred).
    deferred: bool = False
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    deadline: datetime | None = None
    # When the question was asked: its due date and escalation steps count from here.
    asked_at: datetime | None = None
    # 1, plus one each time it is asked again under the same id (DESIGN 3.8).
    round: int = 1

    @property
    def holds_answer(self) -> bool:
        """Answered (or expired with a default) and not yet applied by the engine."""
        return not self.consumed and self.status in (
            InterruptStatus.RESOLVED,
            InterruptStatus.EXPIRED,
        )

    @property
    def awaits_pass(self) -> bool:
        """An answer no pass has seen yet: the invocation has work to do."""
        return self.holds_answer and not self.deferred


@dataclass(slots=True)
class Checkpoint:
    """Everything needed to continue one invocation, and nothing from its history."""

    invocation: InvocationRecord
    node_runs: dict[str, NodeRunState]
    interrupts: dict[str, InterruptRecord]  # pending, or answered and not yet consumed

    def answers(self) -> dict[str, Any]:
        return {i.id: i.response for i in self.interrupts.values() if i.holds_answer}


@dataclass(slots=True)
class Resolution:
    """Close one pending interrupt. Stores apply it only if it is still pending."""

    interrupt_id: str
    status: InterruptStatus
    response: Any = None
    actor: str | None = None
    at: datetime | None = None


@dataclass(slots=True)
class GrantRecord:
    """A remembered approval: later dispatches of the gate (`workflow_name`, `node_name`)
    in its scope whose args satisfy `pins` (a JSON Schema) pass without asking, while it
    is live: not revoked, not expired, uses left (None: unlimited)."""

    id: str
    workflow_name: str
    node_name: str
    scope: GrantScope
    scope_id: str = ""  # the invocation id, the session id, or "" for always
    pins: dict[str, Any] | None = None
    expires_at: datetime | None = None
    uses_left: int | None = None
    granted_by: Any = None  # the actor who approved (None: the system)
    revoked_at: datetime | None = None
    created_at: datetime | None = None
    interrupt_id: str | None = None  # the question whose answer granted it

    def is_live(self, now: datetime) -> bool:
        return (
            self.revoked_at is None
            and (self.expires_at is None or self.expires_at > now)
            and (self.uses_left is None or self.uses_left > 0)
        )


@dataclass(slots=True)
class GrantUse:
    """A dispatch that passed its gate on a grant: which grant, which node run, when.
    Applying it takes one of the grant's uses; a store refuses it (GrantUnavailableError)
    when the grant is no longer live then."""

    grant_id: str
    invocation_id: str
    path: str
    at: datetime


@dataclass(slots=True)
class EffectRecord:
    """One named side effect of a node run, keyed by (invocation, path, name)."""

    invocation_id: str
    path: str
    name: str
    key: str  # the idempotency key the function is given
    status: EffectStatus = EffectStatus.STARTED
    result: Any = None
    error: str | None = None
    attempts: int = 1  # calls of the function so far
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(slots=True)
class WriteBatch:
    """One atomic write: a store commits all of it in one transaction, or none of it."""

    invocation_id: str
    invocation: InvocationRecord | None = None
    node_runs: dict[str, NodeRunState] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    new_interrupts: list[InterruptRecord] = field(default_factory=list)
    resolutions: list[Resolution] = field(default_factory=list)
    consumed: set[str] = field(default_factory=set)
    # Answers a finished pass saw but could not apply (their node run was not reached):
    # they stay unconsumed for a later pass, without counting as work waiting.
    deferred: set[str] = field(default_factory=set)
    # The execution lease this write is made under: the store renews it, and refuses the
    # write (LeaseLostError) when another owner holds it.
    lease_owner: str | None = None
    # The run's last write: the store gives the lease back in the same transaction.
    release_lease: bool = False
    # Effect records to write (insert or replace, by invocation, path and name).
    effects: list[EffectRecord] = field(default_factory=list)
    # Grants to create (a grant whose id exists already is left as it is).
    new_grants: list[GrantRecord] = field(default_factory=list)
    grant_uses: list[GrantUse] = field(default_factory=list)
    # Interrupt rows a rewind rewrites whole (re-answered, superseded, reopened), by id.
    interrupt_updates: list[InterruptRecord] = field(default_factory=list)
    # Grants made by the answers to these interrupts are revoked (a rewound approval).
    revoke_grants_of: set[str] = field(default_factory=set)
    # A rewind reopens the invocation: the store clears its finish and any stale lease.
    reopens: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.invocation
            or self.node_runs
            or self.events
            or self.new_interrupts
            or self.resolutions
            or self.consumed
            or self.deferred
            or self.release_lease
            or self.effects
            or self.new_grants
            or self.grant_uses
            or self.interrupt_updates
            or self.revoke_grants_of
        )

    def put_back(self, taken: WriteBatch) -> None:
        """Merge into this batch an earlier one taken for a commit that failed, so its
        writes are made by the next commit (what this batch holds is newer)."""
        self.invocation = self.invocation or taken.invocation
        self.node_runs = {**taken.node_runs, **self.node_runs}
        self.events[:0] = taken.events
        self.new_interrupts[:0] = taken.new_interrupts
        self.resolutions[:0] = taken.resolutions
        self.consumed |= taken.consumed
        self.deferred |= taken.deferred
        self.effects[:0] = taken.effects
        self.new_grants[:0] = taken.new_grants
        self.grant_uses[:0] = taken.grant_uses
        self.interrupt_updates[:0] = taken.interrupt_updates
        self.revoke_grants_of |= taken.revoke_grants_of
        self.reopens = self.reopens or taken.reopens
        self.release_lease = self.release_lease or taken.release_lease


@dataclass(slots=True)
class RewindReads:
    """What a rewind reads of one invocation (DESIGN 3.8): the checkpoint with every node
    run loaded, every question of the invocation whatever its status, every effect record,
    and the position among its events of the user event holding the current answer."""

    checkpoint: Checkpoint
    questions: dict[str, InterruptRecord]
    effects: list[EffectRecord]
    answer_position: int | None
