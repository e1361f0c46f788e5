"""Grants: approvals of a gate remembered for later dispatches. A decision that says
`remember` makes one (the engine records it when the approved node goes on); staff make
one apart from any decision; people revoke them. The admin and the API call these
services; the rule (who may) is `policy.GranterPolicy`, asked by every one of them."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS
from django.dispatch import receiver
from django.utils import timezone

from ..audit import trail
from ..audit.canonical import canonical_json
from ..conf import hitl_settings
from ..engine.errors import InvalidGrantError, ResponseValidationError, UnknownGrantError
from ..engine.gates import Gate, gates_of
from ..engine.grants import pins_problem
from ..engine.questions import is_gate_question
from ..engine.status import GrantScope
from ..models import Grant
from ..policy import grant_policy
from ..registry import registry
from ..store.actions import grant_action, report_grant_action
from ..transactions import write_transaction


def grant_request_problem(request: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) when a grant asked for (a decision's `pins`, `ttl_seconds`,
    `uses_left`, or a grant made directly) could not be kept or used: pins that are not
    a JSON Schema whose references resolve within it, or nested too deep; a ttl or a
    number of uses that is not a whole number from 1 to HITL["GRANT_MAX_TTL"] /
    HITL["GRANT_MAX_USES"]. None when it can."""
    problem = pins_problem(request.get("pins"))
    if problem is not None:
        return "pins", problem
    limits = {
        "ttl_seconds": hitl_settings.GRANT_MAX_TTL,
        "uses_left": hitl_settings.GRANT_MAX_USES,
    }
    for field, most in limits.items():
        value = request.get(field)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
            return field, f"must be a whole number from 1 to {most}"
    return None


def action_fingerprint(payload: Any) -> str | None:
    """SHA-256 of the canonical `{node, args}` a gate's question asks about (its payload);
    None for a payload that is not a gate's. An approval given for one fingerprint is
    refused for another (`check_fingerprint`)."""
    if not isinstance(payload, dict) or "node" not in payload:
        return None
    action = {"node": payload["node"], "args": payload.get("args")}
    return hashlib.sha256(canonical_json(action)).hexdigest()


def check_fingerprint(interrupt_id: str, payload: Any, fingerprint: str | None) -> None:
    """An answer that names the action it approves (`fingerprint`, from the question's
    envelope) answers only a gate asking about that action: ResponseValidationError
    naming `action_fingerprint` otherwise, before anything is stored."""
    if fingerprint is None:
        return
    if not is_gate_question(interrupt_id) or fingerprint != action_fingerprint(payload):
        raise ResponseValidationError(
            interrupt_id,
            "action_fingerprint",
            "does not match the action this question asks about: read the question again",
        )


def check_grant_answer(interrupt_id: str, response: Any) -> None:
    """An answer to a gate's question that remembers the approval asks for a grant that
    can be kept and used (`grant_request_problem`): ResponseValidationError naming the
    field otherwise, before anything is stored."""
    if not is_gate_question(interrupt_id) or not isinstance(response, dict):
        return
    problem = grant_request_problem(response)
    if problem is not None:
        raise ResponseValidationError(interrupt_id, *problem)


@receiver(grant_action, dispatch_uid="workflows.grants.audit")
def audit_grant_action(
    sender: Any,
    action: str,
    grant_id: str,
    using: str,
    actor_id: Any = None,
    invocation_id: Any = None,
    interrupt_id: str | None = None,
    path: str = "",
    reason: str = "",
    **kwargs: Any,
) -> None:
    """Each grant action's entry in the audit trail, in the transaction that makes it: a
    grant made by a decision joins its question's invocation, a use the invocation that
    passed, the others the chain of actions outside invocations."""
    grant = Grant.objects.using(using).filter(pk=grant_id).first()
    data: dict[str, Any] = {"grant": grant_id}
    if grant is not None:
        data.update(
            workflow=grant.workflow_name,
            node=grant.node_name,
            scope=grant.scope,
            scope_id=grant.scope_id,
        )
        if action == "grant.created":
            data.update(
                pins=grant.pins,
                expires_at=grant.expires_at.isoformat() if grant.expires_at else None,
                uses_left=grant.uses_left,
            )
    if path:
        data["path"] = path
    if reason:
        data["reason"] = reason
    users = get_user_model().objects.using(using)
    actor = users.filter(pk=actor_id).first() if actor_id is not None else None
    trail.record(
        action,
        invocation_id=invocation_id,
        interrupt=interrupt_id,
        actor=actor,
        data=data,
        using=using,
    )


def edit_of(interrupt: Any, answer: Any) -> dict[str, Any] | None:
    """What an edit of a gate's question changed, for the audit trail: the proposed and
    the edited args (None for any other answer)."""
    if not (is_gate_question(interrupt.pk) and isinstance(answer, dict)):
        return None
    if answer.get("decision") != "edit":
        return None
    proposed = (interrupt.payload or {}).get("args")
    edited = answer.get("args")
    if isinstance(proposed, dict) and isinstance(edited, dict):
        changed = sorted(k for k in {*proposed, *edited} if proposed.get(k) != edited.get(k))
        return {"proposed": proposed, "edited": edited, "changed": changed}
    return {"proposed": proposed, "edited": edited}


@write_transaction
def create_grant(
    workflow_name: str,
    node_name: str,
    scope: str,
    *,
    actor: Any,
    scope_id: str = "",
    pins: dict[str, Any] | None = None,
    ttl_seconds: int | None = None,
    expires_at: datetime | None = None,
    uses_left: int | None = None,
) -> Grant:
    """Make a grant apart from any decision (needs `workflows.add_grant`): later
    dispatches of the gate `node_name` of `workflow_name` in the scope pass without
    asking, until `expires_at` (or `ttl_seconds` from now). PermissionDenied or
    InvalidGrantError (naming the field) before anything is stored."""
    refusal = grant_policy().refusal_to_grant(actor, None)
    if refusal:
        raise PermissionDenied(refusal)
    gate = _gate(workflow_name, node_name)
    scope = _scope(gate, scope, scope_id)
    problem = grant_request_problem(
        {"pins": pins, "ttl_seconds": ttl_seconds, "uses_left": uses_left}
    )
    if problem is not None:
        raise InvalidGrantError(*problem)
    now = timezone.now()
    if ttl_seconds is not None and expires_at is not None:
        raise InvalidGrantError("expires_at", "give ttl_seconds or expires_at, not both")
    if expires_at is not None and expires_at <= now:
        raise InvalidGrantError("expires_at", "must be in the future")
    if expires_at is not None and expires_at > now + timedelta(seconds=hitl_settings.GRANT_MAX_TTL):
        raise InvalidGrantError(
            "expires_at", f"must be within {hitl_settings.GRANT_MAX_TTL} seconds from now"
        )
    if ttl_seconds:
        expires_at = now + timedelta(seconds=ttl_seconds)
    grant = Grant.objects.create(
        workflow_name=workflow_name,
        node_name=node_name,
        scope=scope,
        scope_id=scope_id if scope != GrantScope.ALWAYS else "",
        pins=pins or None,
        expires_at=expires_at,
        uses_left=uses_left,
        granted_by=actor,
        created_at=now,
    )
    report_grant_action("grant.created", grant.pk, DEFAULT_DB_ALIAS, actor_id=actor.pk)
    return grant


@write_transaction
def revoke_grant(grant: Grant | str, *, actor: Any) -> Grant:
    """Revoke a grant: later dispatches ask again. Allowed to who granted it and to
    holders of `workflows.change_grant` (PermissionDenied otherwise); revoking a revoked
    grant changes nothing. UnknownGrantError when there is no such grant."""
    grant_id = getattr(grant, "pk", grant)
    locked = Grant.objects.select_for_update().filter(pk=grant_id).first()
    if locked is None:
        raise UnknownGrantError(grant_id)
    refusal = grant_policy().refusal_to_revoke(actor, locked)
    if refusal:
        raise PermissionDenied(refusal)
    if locked.revoked_at is None:
        locked.revoked_at, locked.revoked_by = timezone.now(), actor
        locked.save(update_fields=["revoked_at", "revoked_by"])
        report_grant_action("grant.revoked", locked.pk, DEFAULT_DB_ALIAS, actor_id=actor.pk)
    return locked


def gate_of(workflow_name: str, node_name: str) -> Gate | None:
    """The gate of that name in the latest registered version of the workflow."""
    try:
        workflow = registry.get(workflow_name).workflow
    except LookupError:
        return None
    return gates_of(workflow).get(node_name)


def _gate(workflow_name: str, node_name: str) -> Gate:
    gate = gate_of(workflow_name, node_name)
    if gate is None:
        raise InvalidGrantError(
            "node", f"{workflow_name!r} has no approval gate named {node_name!r}"
        )
    return gate


def _scope(gate: Gate, scope: str, scope_id: str) -> GrantScope:
    allowed = [str(s) for s in gate.remember]
    if scope not in allowed:
        raise InvalidGrantError(
            "scope", f"the gate remembers {', '.join(allowed) or 'nothing'}, not {scope!r}"
        )
    if scope != GrantScope.ALWAYS and not scope_id:
        raise InvalidGrantError("scope_id", f"a grant for one {scope} names it")
    return GrantScope(scope)
