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
from .events import DefaultResponse, Event, FunctionCall, FunctionResponse, RequestInput
from .node_runner import NodeRunner
from .nodes import START, BaseNode, FunctionNode, JoinNode, RetryConfig, node
from .runner import InvocationResult, Runner
from .state import NodeRunState
from .status import InterruptStatus, NodeStatus
from .store import InMemoryStore, OptionalStoreCapabilities, Store
from .workflow import Workflow

__all__ = [
    "START",
    "BaseNode",
    "Context",
    "DefaultResponse",
    "Event",
    "FunctionCall",
    "FunctionNode",
    "FunctionResponse",
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
    "Runner",
    "Store",
    "UnknownInterruptError",
    "Workflow",
    "node",
]
