"""The messages a workflow exchanges: function calls, responses, events, input requests."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from .status import NodeStatus

REQUEST_INPUT_FUNCTION = "request_input"


@dataclass(frozen=True)
class FunctionCall:
    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FunctionResponse:
    """An answer to an interrupt. `id` is the interrupt id; `name` is informational."""

    id: str
    name: str = ""
    response: Any = None


@dataclass(frozen=True)
class DefaultResponse:
    """Timeout policy: answer the interrupt with `response` when its deadline passes."""

    response: Any


FAIL_ON_TIMEOUT = "fail"


@dataclass
class RequestInput:
    """Yielded or returned by a node to pause for an answer.

    `response_schema` is a JSON Schema dict, a pydantic model or a type (stored as JSON
    Schema). `timeout` sets a deadline; `on_timeout` is "fail" (the default), or the
    answer to apply when the deadline passes: a DefaultResponse, or any other value.
    """

    interrupt_id: str | None = None
    message: str = ""
    payload: Any = None
    response_schema: Any = None
    timeout: timedelta | None = None
    on_timeout: Any = FAIL_ON_TIMEOUT

    def __post_init__(self) -> None:
        if self.on_timeout is None:
            self.on_timeout = FAIL_ON_TIMEOUT
        elif self.on_timeout != FAIL_ON_TIMEOUT and not isinstance(
            self.on_timeout, DefaultResponse
        ):
            self.on_timeout = DefaultResponse(self.on_timeout)

    def as_function_call(self) -> FunctionCall:
        assert self.interrupt_id is not None
        return FunctionCall(
            id=self.interrupt_id,
            name=REQUEST_INPUT_FUNCTION,
            args={
                "message": self.message,
                "payload": self.payload,
                "response_schema": self.response_schema,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        on_timeout = self.on_timeout
        return {
            "interrupt_id": self.interrupt_id,
            "message": self.message,
            "payload": self.payload,
            "response_schema": self.response_schema,
            "timeout": self.timeout.total_seconds() if self.timeout else None,
            "on_timeout": (
                {"response": on_timeout.response}
                if isinstance(on_timeout, DefaultResponse)
                else on_timeout
            ),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestInput:
        on_timeout = data.get("on_timeout") or FAIL_ON_TIMEOUT
        timeout = data.get("timeout")
        return cls(
            interrupt_id=data.get("interrupt_id"),
            message=data.get("message", ""),
            payload=data.get("payload"),
            response_schema=data.get("response_schema"),
            timeout=timedelta(seconds=timeout) if timeout is not None else None,
            on_timeout=(
                DefaultResponse(on_timeout["response"])
                if isinstance(on_timeout, dict)
                else on_timeout
            ),
        )


@dataclass
class Event:
    """One entry of a session's history.

    Nodes may yield events (their output, route and long_running_tool_ids apply). The
    engine fills the addressing fields and writes one event per node-run outcome, with
    `status` set to the status that outcome gives the node run.
    """

    output: Any = None
    route: str | None = None
    function_calls: list[FunctionCall] = field(default_factory=list)
    long_running_tool_ids: list[str] = field(default_factory=list)
    function_responses: list[FunctionResponse] = field(default_factory=list)
    error: str | None = None
    invocation_id: str | None = None
    author: str = ""
    path: str = ""
    run_id: int | None = None
    status: NodeStatus | None = None
    timestamp: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        data = dict(data)
        data["function_calls"] = [FunctionCall(**c) for c in data.get("function_calls") or []]
        data["function_responses"] = [
            FunctionResponse(**r) for r in data.get("function_responses") or []
        ]
        if data.get("status"):
            data["status"] = NodeStatus(data["status"])
        return cls(**data)
