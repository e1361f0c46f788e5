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

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import jsonschema

from .errors import GraphError
from .escalation import DEFAULT_PRIORITY, Escalation, check_ladder
from .events import FAIL_ON_TIMEOUT, DefaultResponse, RequestInput
from .grants import (
    METASCHEMA,
    STORABLE_TTL_SECONDS,
    STORABLE_USES,
    covering_grant,
    remembered_grant,
    scope_id,
)
from .nodes import BaseNode, JoinNode, ParallelWorker, as_node
from .questions import gate_question_id
from .schema import check_schema, schema_problems, to_json_schema, validate_response
from .state import GrantUse, copied
from .status import GrantScope

if TYPE_CHECKING:
    from .context import Context

APPROVE, REJECT, EDIT = "approve", "reject", "edit"
REJECTED_ROUTE = "rejected"
TIMED_OUT = {"decision": REJECT, "reason": "no decision before the deadline"}


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
            # Args come with an edit only: an approval runs the proposal as asked.
            rules.append(
                {
                    "if": {"properties": {"decision": {"not": {"const": EDIT}}}},
                    "then": {"not": {"required": ["args"]}},
                }
            )
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if self.remember:
            properties.update(
                remember={"type": "string", "enum": [str(s) for s in self.remember]},
                pins={"type": "object", "$ref": METASCHEMA},
                ttl_seconds={"type": "integer", "minimum": 1, "maximum": STORABLE_TTL_SECONDS},
                uses_left={"type": "integer", "minimum": 1, "maximum": STORABLE_USES},
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

    def args_problem(self, args: Any) -> str | None:
        """Why `args_schema` refuses `args` ("field: message"), formats checked; None
        when it accepts them (or the gate has none)."""
        problems = schema_problems(self.args_schema, args)
        if not problems:
            return None
        field, message = problems[0]
        return f"{field}: {message}"

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
        """Decide once per node run: a re-execution (crash, retry, resume) reuses the
        outcome stored with the run; it never asks again nor consults a grant again."""
        outcome = ctx.gate_outcome
        if outcome is None:
            outcome = await self._decide(ctx, node_input)
            if outcome is None:
                yield self.gate.question(
                    gate_question_id(ctx.idempotency_key), self.name, node_input
                )
                return
        args = outcome["args"] if outcome["decision"] == EDIT else node_input
        ctx.gate = {
            "decision": outcome["decision"],
            "args": args,
            "original_args": node_input,
            "edited": outcome["decision"] == EDIT,
            "reason": outcome.get("reason", ""),
            "by": outcome.get("by"),
            "grant": outcome.get("grant"),
        }
        if outcome["decision"] == REJECT:
            ctx.route = REJECTED_ROUTE
            yield {"rejected": True, "reason": outcome.get("reason", "")}
            return
        problem = self.gate.args_problem(args)
        if problem is not None:  # an answer stored by a door that skipped the schema
            raise ValueError(f"gate {self.name!r}: the args do not satisfy args_schema: {problem}")
        async for item in self.inner.emit(ctx, args):
            yield item

    async def _decide(self, ctx: Context, node_input: Any) -> dict[str, Any] | None:
        """The gate's outcome, stored with the node run before the body runs; None: ask."""
        question_id = gate_question_id(ctx.idempotency_key)
        answer = ctx.own_answers.get(question_id)
        if answer is not None:
            outcome = self._answered(ctx, question_id, answer)
            if outcome["decision"] == REJECT:  # no body runs: kept with the run's outcome
                ctx.gate_outcome = outcome
            else:
                await self._keep(ctx, outcome)
            return outcome
        problem = self.gate.args_problem(node_input)
        if problem is not None:
            # Nobody may approve what the gate's schema refuses: rejected, so the proposer
            # can revise it (route "rejected").
            outcome = {
                "decision": REJECT,
                "reason": f"the args do not satisfy args_schema: {problem}",
            }
            ctx.gate_outcome = outcome  # kept with the run's outcome: no body runs
            return outcome
        return await self._passed_on_grant(ctx, node_input)

    def _answered(self, ctx: Context, question_id: str, answer: Any) -> dict[str, Any]:
        execution = ctx._execution
        asked = execution.interrupts.get(question_id)
        answer = answer if isinstance(answer, dict) else {}
        decision = answer.get("decision")
        outcome: dict[str, Any] = {
            "decision": decision if decision in (APPROVE, EDIT) else REJECT,
            "reason": answer.get("reason", ""),
            "by": asked.resolved_by if asked else None,
        }
        if decision == EDIT:
            outcome["args"] = answer.get("args")
        fresh = question_id in execution.answers  # a grant is made once, from a new answer
        if outcome["decision"] != REJECT and answer.get("remember") and fresh:
            grant = remembered_grant(ctx, self.name, question_id, answer)
            if grant is not None and all(g.id != grant.id for g in execution.batch.new_grants):
                execution.batch.new_grants.append(grant)
        return outcome

    async def _keep(
        self, ctx: Context, outcome: dict[str, Any], use: GrantUse | None = None
    ) -> None:
        """Store the outcome with the node run (and the grant use it rests on), committed
        before the body runs: one write."""
        execution = ctx._execution
        ctx.gate_outcome = outcome
        state = execution.node_runs.get(ctx.path)
        if state is not None:
            execution.save(ctx.path, copied(state, gate=outcome))
        if use is not None:
            execution.batch.grant_uses.append(use)
        ctx.checkpoint_due = False
        await execution.flush()

    async def _passed_on_grant(self, ctx: Context, args: Any) -> dict[str, Any] | None:
        """The outcome of passing on a live grant that covers `args`, committed with the
        grant's use (one use per gated dispatch); None when none does (or the store
        found it no longer live then). One read; none for a gate without scopes."""
        execution = ctx._execution
        if not self.gate.remember or execution.store is None:
            return None
        now = datetime.now(UTC)
        scopes = {scope: scope_id(ctx, scope) for scope in self.gate.remember}
        grants = await execution.store.find_grants(
            execution.invocation.workflow_name, self.name, scopes.items(), now
        )
        grant = covering_grant(grants, args)
        if grant is None:
            return None
        outcome = {"decision": APPROVE, "reason": "", "by": grant.granted_by, "grant": grant.id}
        use = GrantUse(grant.id, ctx.invocation_id, ctx.path, now)
        await self._keep(ctx, outcome, use)
        if any(refused is use for refused in execution.refused_grant_uses):
            ctx.gate_outcome = None  # taken back with the use (Execution._undecide)
            return None
        return outcome


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
