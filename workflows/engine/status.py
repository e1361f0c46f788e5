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

    @property
    def is_final(self) -> bool:
        return self in _FINAL


_FINAL = {NodeStatus.COMPLETED, NodeStatus.FAILED, NodeStatus.CANCELLED}


class InterruptStatus(StrEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class GrantScope(StrEnum):
    """How far a remembered approval reaches: this invocation, its session, or every
    later dispatch of the same gate."""

    INVOCATION = "invocation"
    SESSION = "session"
    ALWAYS = "always"


class EffectStatus(StrEnum):
    """An effect's record: started (durably, before its function is called), finished
    (its result stored), failed (its function raised), in_doubt (started, never finished,
    and a person is asked whether it happened)."""

    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"
