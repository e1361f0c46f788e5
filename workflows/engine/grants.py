"""Grants, the engine's part: what a grant is bound to, which grant covers a dispatch's
args, what pins may be, and the grant an approval asks for (or a quorum's approvals).
The store keeps grants (Store.find_grants, WriteBatch.new_grants and grant_uses)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing.exceptions
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from .schema import check_schema, schema_problems
from .state import GrantRecord
from .status import GrantScope
from .values import nesting_depth

if TYPE_CHECKING:
    from .context import Context

# The JSON Schema of JSON Schemas: a grant's pins must be one (jsonschema knows it offline).
METASCHEMA = "https://json-schema.org/draft/2020-12/schema"
_GRANT_NAMESPACE = uuid.UUID("0d6f4a52-7be1-4c39-8f0e-2a9c51d3e874")

# What any store keeps of a grant (a datetime's range, a 32-bit count), whatever limits
# the application sets for people (HITL["GRANT_MAX_TTL"], ["GRANT_MAX_USES"]).
STORABLE_TTL_SECONDS = 100 * 366 * 24 * 3600
STORABLE_USES = 2**31 - 1
MAX_PINS_DEPTH = 32  # levels of nesting in a grant's pins
REMEMBER_FIELDS = ("remember", "pins", "ttl_seconds", "uses_left")


def remembered_grant(
    ctx: Context, node_name: str, question_id: str, answer: dict[str, Any]
) -> GrantRecord | None:
    """The grant an approval of the gate `node_name` asks for (`remember`, with its pins,
    ttl and uses), made once per answer; None for one no store could keep (pins that do
    not resolve, an expiry past any date): later dispatches then ask."""
    execution = ctx._execution
    now = datetime.now(UTC)
    scope = GrantScope(answer["remember"])
    ttl = answer.get("ttl_seconds")
    uses = answer.get("uses_left")
    if pins_problem(answer.get("pins")) is not None:
        return None
    if (ttl is not None and not 0 < ttl <= STORABLE_TTL_SECONDS) or (
        uses is not None and not 0 < uses <= STORABLE_USES
    ):
        return None
    asked = execution.interrupts.get(question_id)
    return GrantRecord(
        id=str(uuid.uuid5(_GRANT_NAMESPACE, question_id)),  # once per answer
        workflow_name=execution.invocation.workflow_name,
        node_name=node_name,
        scope=scope,
        scope_id=scope_id(ctx, scope),
        pins=answer.get("pins"),
        expires_at=now + timedelta(seconds=ttl) if ttl else None,
        uses_left=uses,
        granted_by=asked.resolved_by if asked else None,
        created_at=now,
        interrupt_id=question_id,
    )


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
    """Whether `args` satisfy the pins (formats checked); pins that cannot be applied
    (kept from before they were checked) allow nothing."""
    if not pins:
        return True
    try:
        return not schema_problems(pins, args)
    except (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable, RecursionError):
        return False


def pins_problem(pins: Any) -> str | None:
    """Why `pins` cannot be a grant's pins, or None: a JSON Schema object, nested at most
    MAX_PINS_DEPTH levels, whose references all resolve within it (nothing is fetched)."""
    if pins is None:
        return None
    if not isinstance(pins, dict):
        return "must be a JSON Schema object"
    if nesting_depth(pins, MAX_PINS_DEPTH) > MAX_PINS_DEPTH:
        return f"nested more than {MAX_PINS_DEPTH} levels deep"
    try:
        check_schema(pins)
    except jsonschema.SchemaError as exc:
        return f"not a JSON Schema: {exc.message}"
    specification = specification_with(pins.get("$schema", METASCHEMA), default=DRAFT202012)
    resolver = Registry().resolver_with_root(specification.create_resource(pins))
    for ref in _references(pins):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            return f"its reference {ref!r} does not resolve within the pins"
    return None


def _references(schema: Any) -> list[str]:
    """Every `$ref` and `$dynamicRef` in `schema`, walked without recursion."""
    found: list[str] = []
    todo = [schema]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            found += [
                v for k, v in item.items() if k in ("$ref", "$dynamicRef") and isinstance(v, str)
            ]
            todo += list(item.values())
        elif isinstance(item, list):
            todo += item
    return found


def remembered_by_all(answer: dict[str, Any], approvals: list[Any]) -> dict[str, Any]:
    """A quorum's answer to a gate's question: a grant only when every approving decision
    asked to remember, with the narrowest scope, pins (all of them), ttl and uses among
    them; otherwise the answer remembers nothing."""
    answer = {k: v for k, v in answer.items() if k not in REMEMBER_FIELDS}
    votes = [a for a in approvals if isinstance(a, dict)]
    if not votes or any(not a.get("remember") for a in votes):
        return answer
    order = [str(scope) for scope in GrantScope]  # narrowest first
    answer["remember"] = min((a["remember"] for a in votes), key=order.index)
    pins = [a["pins"] for a in votes if a.get("pins")]
    if len(pins) == 1:
        answer["pins"] = pins[0]
    elif pins:
        # Each its own resource, so that its "#/..." references still resolve in it.
        answer["pins"] = {"allOf": [{"$id": f"urn:hitl:pins:{i}", **p} for i, p in enumerate(pins)]}
    for name in ("ttl_seconds", "uses_left"):
        given = [a[name] for a in votes if a.get(name) is not None]
        if given:
            answer[name] = min(given)
    return answer
