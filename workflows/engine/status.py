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
