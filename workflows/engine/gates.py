"""Approval gates: a node that asks before its body runs (approve, reject, edit), and
grants that remember an approval for later dispatches of the same gate.

```python
@approval_gate(message="Refund {amount} to {customer}?", args_schema={...},
               assignees=["group:support"], allow_edit=True,
               remember=("invocation", "session", "always"))
@node(name="refund")
def refund(node_input, ctx): ...
```
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import jsonschema

from .errors import GraphError
from .escalation import DEFAULT_PRIORITY, Escalation, check_ladder
from .events import FAIL_ON_TIMEOUT, DefaultResponse, RequestInput
from .nodes import BaseNode, JoinNode, ParallelWorker, as_node
from .questions import gate_question_id
from .schema import check_schema, to_json_schema, validate_response
from .state import GrantRecord, GrantUse
from .status import GrantScope

if TYPE_CHECKING:
    from .context import Context

APPROVE, REJECT, EDIT = "approve", "reject", "edit"
REJECTED_ROUTE = "rejected"
# The JSON Schema of JSON Schemas: a grant's pins must be one (jsonschema knows it offline).
METASCHEMA = "https://json-schema.org/draft/2020-12/schema"
TIMED_OUT = {"decision": REJECT, "reason": "no decision before the deadline"}
_GRANT_NAMESPACE = uuid.UUID("0d6f4a52-7be1-4c39-8f0e-2a9c51d3e874")


def _when_decision(decision: str, then: dict[str, Any]) -> dict[str, Any]:
    return {
        "if": {"properties": {"decision": {"const": decision}}, "required": ["decision"]},
        "then": then,
    }


@dataclass(frozen=True)
class Gate:
    """What a gated node asks, and which answers it takes (see `approval_gate`)."""

    message: str = ""
    args_schema: dict[str, Any] | None = None
    assignees: tuple[str, ...] = ()
    allow_edit: bool = False
    remember: tuple[GrantScope, ...] = ()
    quorum: int = 1
    four_eyes: bool = False
    timeout: timedelta | None = None
    on_timeout: Any = FAIL_ON_TIMEOUT
    priority: str = DEFAULT_PRIORITY
    due: timedelta | None = None
    escalation: list[Escalation] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # more RequestInput fields

    def response_schema(self) -> dict[str, Any]:
        """The JSON Schema every answer is validated against where answers are accepted:
        an edit only when edits are allowed, its args against `args_schema`, `remember`
        one of the allowed scopes (a rejection remembers nothing), pins a JSON Schema."""
        decisions = [APPROVE, REJECT, *([EDIT] if self.allow_edit else [])]
        properties: dict[str, Any] = {
            "decision": {"type": "string", "enum": decisions, "title": "Decision"},
            "reason": {
                "type": "string",
                "title": "Reason",
                "description": "Why; a rejection's reason goes back to who proposed it",
            },
        }
        rules = []
        if self.allow_edit:
            properties["args"] = self.args_schema or {}
            rules.append(_when_decision(EDIT, {"required": ["args"]}))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if self.remember:
            properties.update(
                remember={"type": "string", "enum": [str(s) for s in self.remember]},
                pins={"type": "object", "$ref": METASCHEMA},
                ttl_seconds={"type": "integer", "minimum": 1},
                uses_left={"type": "integer", "minimum": 1},
            )
            schema["dependentRequired"] = {
                "pins": ["remember"],
                "ttl_seconds": ["remember"],
                "uses_left": ["remember"],
            }
        if self.quorum > 1:
            properties["decisions"] = {"type": "array"}  # added by the approval service
        schema.update(required=["decision"], additionalProperties=False)
        if rules:
            schema["allOf"] = rules
        return schema

    def question(self, interrupt_id: str, node_name: str, args: Any) -> RequestInput:
        return self._request(
            interrupt_id, self.message_for(node_name, args), {"node": node_name, "args": args}
        )

    def _request(self, interrupt_id: str, message: str, payload: Any) -> RequestInput:
        return RequestInput(
            interrupt_id=interrupt_id,
            message=message,
            payload=payload,
            response_schema=self.response_schema(),
            timeout=self.timeout,
            on_timeout=self.on_timeout,
            assignees=list(self.assignees),
            quorum=self.quorum,
            four_eyes=self.four_eyes,
            priority=self.priority,
            due=self.due,
            escalation=list(self.escalation),
            **self.options,
        )

    def message_for(self, node_name: str, args: Any) -> str:
        """`message.format(**args)` (args that are not an object fill no field)."""
        try:
            return self.message.format(**(args if isinstance(args, dict) else {}))
        except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
            raise ValueError(
                f"gate {node_name!r}: its message {self.message!r} cannot be filled from "
                f"the args {args!r} ({type(exc).__name__}: {exc})"
            ) from None


def approval_gate(
    *,
    message: str = "",
    args_schema: dict[str, Any] | None = None,
    assignees: Iterable[str] = (),
    allow_edit: bool = False,
    remember: Iterable[str] | str = (),
    quorum: int = 1,
    four_eyes: bool = False,
    timeout: timedelta | float | None = None,
    on_timeout: Any = FAIL_ON_TIMEOUT,
    priority: str = DEFAULT_PRIORITY,
    due: timedelta | float | None = None,
    escalation: list[Escalation] | tuple[Escalation, ...] = (),
    **options: Any,
) -> Callable[[Any], BaseNode]:
    """Gate a node: it asks before its body runs (the question's payload is
    `{"node": name, "args": node_input}`), and its body runs only once approved.

    An answer is `{"decision": "approve" | "reject" | "edit", "args", "reason",
    "remember", "pins", "ttl_seconds", "uses_left"}`, only `decision` required. Approve:
    the body runs with the input. Edit (with `allow_edit`): with the edited `args`,
    valid against `args_schema`. Reject: the body does not run; the node completes with
    `{"rejected": True, "reason": ...}` and route "rejected". `remember` (one of the
    gate's `remember` scopes) records a grant: later dispatches of the same gate (same
    workflow and node name) in its scope whose args satisfy `pins` pass without asking,
    until it expires (`ttl_seconds`), is used up (`uses_left`) or is revoked.

    `message` is formatted with the args; `assignees`, `quorum`, `four_eyes`, `timeout`,
    `priority`, `due` (like `timeout`, a timedelta or seconds), the `escalation` ladder
    and any other RequestInput field apply to the question; `on_timeout` is "fail",
    "reject" or an answer to apply at the deadline. Bad values raise ValueError here,
    where the gate is declared."""
    gate = Gate(
        message=message,
        args_schema=to_json_schema(args_schema),
        assignees=tuple(assignees),
        allow_edit=allow_edit,
        remember=_scopes(remember),
        quorum=quorum,
        four_eyes=four_eyes,
        timeout=_delay(timeout),
        on_timeout=DefaultResponse(TIMED_OUT) if on_timeout == REJECT else on_timeout,
        priority=priority,
        due=_delay(due),
        escalation=check_ladder(escalation),
        options=options,
    )
    _check(gate)
    return lambda wrapped: gated(wrapped, gate)


def _delay(value: timedelta | float | None) -> timedelta | None:
    """A delay given in seconds as a timedelta (RequestInput checks it is positive)."""
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    return value


def _scopes(remember: Iterable[str] | str) -> tuple[GrantScope, ...]:
    values = [remember] if isinstance(remember, str) else list(remember)
    allowed = [str(s) for s in GrantScope]
    for value in values:
        if value not in allowed:
            raise ValueError(f"remember: {value!r} is not one of {', '.join(allowed)}")
    return tuple(dict.fromkeys(GrantScope(v) for v in values))


def _check(gate: Gate) -> None:
    """Refuse a gate that could not ask its question, when it is declared."""
    if gate.args_schema is not None:
        try:
            check_schema(gate.args_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"args_schema is not a JSON Schema: {exc.message}") from None
    if gate.allow_edit and gate.quorum > 1:
        raise ValueError(
            "allow_edit cannot be combined with a quorum above 1: each approver would vote "
            "on different args"
        )
    probe = gate._request("probe", "", None)  # checks assignees, quorum and options
    if isinstance(probe.on_timeout, DefaultResponse):
        validate_response("on_timeout", probe.response_schema, probe.on_timeout.response)


def gated(wrapped: Any, gate: Gate) -> BaseNode:
    """`wrapped` (a node or function) behind `gate`; a parallel worker's items each ask."""
    inner = as_node(wrapped)
    if isinstance(inner, ParallelWorker):
        return ParallelWorker(GatedNode(inner.item_node, gate))
    if isinstance(inner, JoinNode) or inner.outputs_a_childs_output:
        raise GraphError(
            f"approval_gate gates a node that does the work; {inner.name!r} is a "
            f"{type(inner).__name__}: gate the node inside it"
        )
    return GatedNode(inner, gate)


class GatedNode(BaseNode):
    """A node whose body runs only after its gate's question is approved (or a live grant
    covers its args). Same name, retry, timeout and rerun_on_resume as the node it wraps."""

    def __init__(self, inner: BaseNode, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate
        super().__init__(
            inner.name,
            rerun_on_resume=inner.rerun_on_resume,
            retry=inner.retry,
            timeout=inner.timeout,
        )

    def emit(self, ctx: Context, node_input: Any) -> AsyncIterator[Any]:
        return self._emit(ctx, node_input)

    async def _emit(self, ctx: Context, node_input: Any) -> AsyncIterator[Any]:
        question_id = gate_question_id(ctx.idempotency_key)
        answer = ctx.own_answers.get(question_id)
        args = node_input
        if answer is None:
            if not await self._passes_on_grant(ctx, node_input):
                yield self.gate.question(question_id, self.name, node_input)
                return
        elif answer.get("decision") == REJECT:  # remembers nothing, whatever it says
            ctx.route = REJECTED_ROUTE
            yield {"rejected": True, "reason": answer.get("reason", "")}
            return
        else:
            if answer.get("decision") == EDIT:
                args = answer["args"]
            if answer.get("remember") and question_id in ctx._execution.answers:
                self._remember(ctx, question_id, answer)
        async for item in self.inner.emit(ctx, args):
            yield item

    async def _passes_on_grant(self, ctx: Context, args: Any) -> bool:
        """Whether a live grant covers `args`; its use is committed (with the run's
        checkpoint) before the body runs. One read; none for a gate without scopes."""
        execution = ctx._execution
        if not self.gate.remember or execution.store is None:
            return False
        now = datetime.now(UTC)
        scopes = {scope: scope_id(ctx, scope) for scope in self.gate.remember}
        grants = await execution.store.find_grants(
            execution.invocation.workflow_name, self.name, scopes.items(), now
        )
        grant = covering_grant(grants, args)
        if grant is None:
            return False
        use = GrantUse(grant.id, ctx.invocation_id, ctx.path, now)
        execution.batch.grant_uses.append(use)
        ctx.checkpoint_due = False
        await execution.flush()
        return not any(refused is use for refused in execution.refused_grant_uses)

    def _remember(self, ctx: Context, question_id: str, answer: dict[str, Any]) -> None:
        execution = ctx._execution
        now = datetime.now(UTC)
        scope = GrantScope(answer["remember"])
        ttl = answer.get("ttl_seconds")
        asked = execution.interrupts.get(question_id)
        grant = GrantRecord(
            id=str(uuid.uuid5(_GRANT_NAMESPACE, question_id)),  # once per answer
            workflow_name=execution.invocation.workflow_name,
            node_name=self.name,
            scope=scope,
            scope_id=scope_id(ctx, scope),
            pins=answer.get("pins"),
            expires_at=now + timedelta(seconds=ttl) if ttl else None,
            uses_left=answer.get("uses_left"),
            granted_by=asked.resolved_by if asked else None,
            created_at=now,
            interrupt_id=question_id,
        )
        if all(g.id != grant.id for g in execution.batch.new_grants):
            execution.batch.new_grants.append(grant)


def scope_id(ctx: Context, scope: GrantScope) -> str:
    """What a grant of `scope` made in this run is bound to (a run without a session is
    its own session)."""
    invocation = ctx._execution.invocation
    if scope == GrantScope.INVOCATION:
        return invocation.id
    if scope == GrantScope.SESSION:
        return str(invocation.session_id or invocation.id)
    return ""


def covering_grant(grants: Iterable[GrantRecord], args: Any) -> GrantRecord | None:
    """The grant (narrowest scope first, then oldest) whose pins `args` satisfy."""
    order = {scope: index for index, scope in enumerate(GrantScope)}
    for grant in sorted(grants, key=lambda g: order[GrantScope(g.scope)]):
        if pins_allow(grant.pins, args):
            return grant
    return None


def pins_allow(pins: dict[str, Any] | None, args: Any) -> bool:
    if not pins:
        return True
    valid: bool = jsonschema.validators.validator_for(pins)(pins).is_valid(args)
    return valid


def gates_of(node: BaseNode) -> dict[str, Gate]:
    """{node name: gate} of the gated nodes in `node` (a workflow): nested ones, parallel
    workers' items, and the nodes a node declares it runs (`runs`)."""
    found: dict[str, Gate] = {}
    if isinstance(node, GatedNode):
        found[node.name] = node.gate
        node = node.inner
    children = [*getattr(node, "nodes", {}).values(), *node.runs]
    if isinstance(node, ParallelWorker):
        children.append(node.item_node)
    for child in children:
        found.update(gates_of(child))
    return found
