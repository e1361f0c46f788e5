"""The framework-free workflow engine: nodes, workflows, interrupts, checkpoint and resume.

Nothing here imports Django or Celery; persistence goes through the Store protocol.
"""

from .context import Context
from .errors import (
    InterruptNotPendingError,
    MultipleInvocationsError,
    ResponseValidationError,
    UnknownInterruptError,
)
from .escalation import PRIORITIES, Escalation
from .events import DefaultResponse, Event, FunctionCall, FunctionResponse, RequestInput
from .gates import approval_gate
from .node_runner import NodeRunner
from .nodes import START, BaseNode, FunctionNode, JoinNode, RetryConfig, node
from .rewind import RewindPlan
from .runner import InvocationResult, Runner
from .state import EffectRecord, GrantRecord, GrantUse, NodeRunState
from .status import EffectStatus, GrantScope, InterruptStatus, NodeStatus
from .store import InMemoryStore, OptionalStoreCapabilities, Store
from .workflow import Workflow

__all__ = [
    "PRIORITIES",
    "START",
    "BaseNode",
    "Context",
    "DefaultResponse",
    "EffectRecord",
    "EffectStatus",
    "Escalation",
    "Event",
    "FunctionCall",
    "FunctionNode",
    "FunctionResponse",
    "GrantRecord",
    "GrantScope",
    "GrantUse",
    "InMemoryStore",
    "InterruptNotPendingError",
    "InterruptStatus",
    "InvocationResult",
    "JoinNode",
    "MultipleInvocationsError",
    "NodeRunState",
    "NodeRunner",
    "NodeStatus",
    "OptionalStoreCapabilities",
    "RequestInput",
    "ResponseValidationError",
    "RetryConfig",
    "RewindPlan",
    "Runner",
    "Store",
    "UnknownInterruptError",
    "Workflow",
    "approval_gate",
    "node",
]
