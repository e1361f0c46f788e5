"""The messages a workflow exchanges: function calls, responses, events, input requests."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from .escalation import DEFAULT_PRIORITY, Escalation, check_delay, check_ladder, check_priority
from .principals import parse_assignee
from .schema import to_json_schema
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


def approval_schema_problem(schema: Any, quorum: int) -> str | None:
    """Why `schema` cannot collect `quorum` approvals, or None when it can.

    M-of-N approval needs a boolean `approved` property; the decisions service adds a
    `decisions` list to the combined answer, so the schema must accept that key too."""
    if quorum == 1:
        return None
    schema = to_json_schema(schema)
    properties = (schema or {}).get("properties") or {}
    votes = {"approve", "reject"} <= set((properties.get("decision") or {}).get("enum") or ())
    if (properties.get("approved") or {}).get("type") != "boolean" and not votes:
        return (
            "a quorum above 1 needs a response_schema with a boolean 'approved' property "
            "(or an approval gate's 'decision')"
        )
    if "decisions" in (schema.get("required") or []):
        return "'decisions' is added by the approval service; it cannot be required"
    if schema.get("additionalProperties") is False and "decisions" not in properties:
        return (
            "a quorum above 1 adds a 'decisions' list to the answer; declare a 'decisions' "
            "property (an array) or allow additional properties"
        )
    return None


def approval_vote(response: Any) -> bool | None:
    """What a quorum vote says: True approves, False rejects, None is no vote. Its boolean
    `approved`, or an approval gate's `decision` (an edit approves)."""
    if not isinstance(response, dict):
        return None
    approved = response.get("approved")
    if isinstance(approved, bool):
        return approved
    decision = response.get("decision")
    if not isinstance(decision, str):  # an answer of another shape is no vote
        return None
    return {"approve": True, "edit": True, "reject": False}.get(decision)


@dataclass
class RequestInput:
    """Yielded or returned by a node to pause for an answer.

    `response_schema` is a JSON Schema dict, a pydantic model or a type (stored as JSON
    Schema). `timeout` sets a deadline; `on_timeout` is "fail" (the default), or the
    answer to apply when the deadline passes: a DefaultResponse, or any other value.

    Who answers: `assignees` lists "user:<username>" and "group:<name>" strings (none:
    anyone allowed to answer), each principal once (a repeat is dropped); `quorum`
    approvals are needed (above 1 only for a schema with a boolean `approved`), more than
    the named users can give is refused; `four_eyes` bars the person who started the
    invocation. `require_signature` accepts a decision only when the approver signs
    it with a passkey or security key (WebAuthn) they registered.

    The people layer (DESIGN 4.3): `priority` (low, normal, high, urgent) and `due` (a
    target, shown and sorted on; `timeout` is the hard deadline) order the inbox;
    `escalation` is a ladder of Escalation steps the periodic sweep applies in order.
    Bad values raise ValueError here, so the node raising it fails.
    """

    interrupt_id: str | None = None
    message: str = ""
    payload: Any = None
    response_schema: Any = None
    timeout: timedelta | None = None
    on_timeout: Any = FAIL_ON_TIMEOUT
    assignees: list[str] = field(default_factory=list)
    quorum: int = 1
    four_eyes: bool = False
    require_signature: bool = False
    priority: str = "normal"
    due: timedelta | None = None
    escalation: list[Escalation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._check_who_answers()
        check_priority(self.priority)
        if self.due is not None:
            check_delay("due", self.due)
        self.escalation = check_ladder(self.escalation)
        if self.on_timeout is None:
            self.on_timeout = FAIL_ON_TIMEOUT
        elif self.on_timeout != FAIL_ON_TIMEOUT and not isinstance(
            self.on_timeout, DefaultResponse
        ):
            self.on_timeout = DefaultResponse(self.on_timeout)

    def _check_who_answers(self) -> None:
        if isinstance(self.assignees, str) or not isinstance(self.assignees, list | tuple):
            raise ValueError(f"assignees must be a list of strings, not {self.assignees!r}")
        parsed = [parse_assignee(a) for a in self.assignees]
        # Distinct principals: naming someone twice does not make them two approvers.
        self.assignees = list(dict.fromkeys(self.assignees))
        kinds = {kind for kind, _ in parsed}
        users = {name for kind, name in parsed if kind == "user"}
        if not isinstance(self.quorum, int) or isinstance(self.quorum, bool) or self.quorum < 1:
            raise ValueError(f"quorum must be an integer of at least 1, not {self.quorum!r}")
        if not isinstance(self.four_eyes, bool):
            raise ValueError(f"four_eyes must be True or False, not {self.four_eyes!r}")
        if not isinstance(self.require_signature, bool):
            raise ValueError(
                f"require_signature must be True or False, not {self.require_signature!r}"
            )
        problem = approval_schema_problem(self.response_schema, self.quorum)
        if problem:
            raise ValueError(problem)
        # With groups named, who is in them is the store's to count (Store.check_assignees).
        if kinds == {"user"} and len(users) < self.quorum:
            raise ValueError(
                f"quorum {self.quorum} cannot be met by the {len(users)} assigned user(s)"
            )

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
            "assignees": list(self.assignees),
            "quorum": self.quorum,
            "four_eyes": self.four_eyes,
            "require_signature": self.require_signature,
            "priority": self.priority,
            "due": self.due.total_seconds() if self.due else None,
            "escalation": [step.to_dict() for step in self.escalation],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestInput:
        on_timeout = data.get("on_timeout") or FAIL_ON_TIMEOUT
        timeout = data.get("timeout")
        due = data.get("due")
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
            assignees=list(data.get("assignees") or []),
            quorum=data.get("quorum") or 1,
            four_eyes=bool(data.get("four_eyes")),
            require_signature=bool(data.get("require_signature")),
            priority=data.get("priority") or DEFAULT_PRIORITY,
            due=timedelta(seconds=due) if due is not None else None,
            escalation=[Escalation.from_dict(step) for step in data.get("escalation") or []],
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
    # A user event that changed an answer already given (DESIGN 3.8), and the position
    # among the invocation's events of the user event whose answer it replaces.
    rewound: bool = False
    replaces: int | None = None

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
