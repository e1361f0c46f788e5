"""Status enums. Values are their names so they serialize as-is."""

from enum import StrEnum


class NodeStatus(StrEnum):
    """Status of a node run, and of an invocation (they share one lifecycle)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING = "WAITING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    # A node run a rewind took out of the invocation (DESIGN 3.8): kept, never re-entered.
    # Node runs only: an invocation is never SUPERSEDED.
    SUPERSEDED = "SUPERSEDED"

    @property
    def is_final(self) -> bool:
        return self in _FINAL


_FINAL = {NodeStatus.COMPLETED, NodeStatus.FAILED, NodeStatus.CANCELLED, NodeStatus.SUPERSEDED}


class InterruptStatus(StrEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    # Owned by a node run a rewind superseded (or asked after the answer it changed):
    # its id is free, and a run raising it again reopens it.
    SUPERSEDED = "superseded"


class GrantScope(StrEnum):
    """How far a remembered approval reaches: this invocation, its session, or every
    later dispatch of the same gate."""

    INVOCATION = "invocation"
    SESSION = "session"
    ALWAYS = "always"


class EffectStatus(StrEnum):
    """An effect's record: started (durably, before its function is called), finished
    (its result stored), failed (its function raised), in_doubt (started, never finished,
    and a person is asked whether it happened), rewound (confirmed by a rewind: done again)."""

    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"
    # Confirmed by a rewind (DESIGN 3.8): the re-executed run calls it again, under its
    # key with a `:rewind-<n>` suffix.
    REWOUND = "rewound"
