"""Refusals as JSON-RPC errors: the code the API would give, the detail, and where the
question can be answered instead. Nothing is stored before any of them is raised."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ...engine.errors import WorkflowError
from ...registry import UnknownWorkflowError

# JSON-RPC leaves -32000..-32099 to the server: the API's 403, 404 and 409.
FORBIDDEN = -32003
NOT_FOUND = -32004
CONFLICT = -32009

JSONRPC_CODE_BY_ERROR = {
    "unknown_interrupt": NOT_FOUND,
    "unknown_invocation": NOT_FOUND,
    "interrupt_not_pending": CONFLICT,
    "interrupt_superseded": CONFLICT,
    "already_decided": CONFLICT,
    "decision_required": CONFLICT,
    "invalid_invocation_state": CONFLICT,
    "definition_changed": CONFLICT,
    "grant_unavailable": CONFLICT,
}


def refusal(code: str, detail: str, jsonrpc_code: int = INVALID_PARAMS, **extra: Any) -> MCPError:
    return MCPError(
        code=jsonrpc_code, message=detail, data={"error": code, "detail": detail, **extra}
    )


def as_refusal(exc: Exception) -> MCPError | None:
    """The protocol error for a service's refusal, None for anything else (a bug)."""
    if isinstance(exc, (WorkflowError, UnknownWorkflowError)):
        code = getattr(exc, "code", "invalid_request")
        return refusal(code, str(exc), JSONRPC_CODE_BY_ERROR.get(code, INVALID_PARAMS))
    if isinstance(exc, PermissionDenied):
        code = getattr(exc, "code", None) or "permission_denied"
        return refusal(code, str(exc) or "you may not do this", FORBIDDEN)
    if isinstance(exc, DjangoValidationError):
        return refusal("invalid_request", "; ".join(exc.messages))
    return None
