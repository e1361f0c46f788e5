"""OpenAPI documentation helpers: the error responses and the Idempotency-Key header."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from ..registry import registry
from .idempotency import HEADER, MAX_KEY_LENGTH
from .serializers import ErrorSerializer

ERROR_DESCRIPTIONS = {
    400: "Invalid request: `field` names what is wrong (`invalid_request`, "
    "`invalid_response`, `invalid_input`, `invalid_grant`, `unknown_workflow`, "
    "`multiple_invocations`, `invalid_last_event_id`).",
    401: "Not authenticated (`not_authenticated`, `authentication_failed`).",
    403: "Not allowed (`permission_denied`): the answer rule or a model permission refused; "
    "or the question needs a passkey's signature and none came (`signature_required`), the "
    "caller has no passkey (`no_passkey`), or the signature does not hold (`invalid_signature`).",
    404: "Unknown interrupt, invocation, grant, delegation or workflow, or one you may not "
    "see (`unknown_interrupt`, `unknown_invocation`, `unknown_grant`, `unknown_delegation`, "
    "`not_found`).",
    409: "Conflict: the interrupt is not pending or was answered differently "
    "(`interrupt_not_pending`), the caller already decided (`already_decided`), the "
    "question needs several approvals and takes decisions only (`decision_required`), or "
    "the invocation's status does not allow it (`invalid_invocation_state`).",
    413: "The request body is larger than HITL['MAX_RESPONSE_BYTES'] (`payload_too_large`).",
    415: "The request body is not JSON (`unsupported_media_type`).",
    422: "This Idempotency-Key was used with a different request (`idempotency_key_reused`).",
    429: "Too many requests (`throttled`); retry after the Retry-After header.",
    503: "This server serves HITL['STREAM_MAX_CLIENTS'] live streams already (`stream_capacity`).",
}

READ_ERRORS = (401, 403, 429)
LIST_ERRORS = (400, 404, *READ_ERRORS)
POST_ERRORS = (400, 401, 403, 413, 415, 422, 429)

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=f"Up to {MAX_KEY_LENGTH} characters. A repeat with the same key and body gets "
    "the stored response (header Idempotent-Replayed: true); the same key with another body "
    "gets 422. Keys expire after HITL['IDEMPOTENCY_KEY_TTL'] seconds.",
)


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    return {
        code: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
        for code in statuses
    }


class WorkflowNameFieldExtension(OpenApiSerializerFieldExtension):
    """Documents a workflow name as an enum of the workflows registered now."""

    target_class = "workflows.api.serializers.WorkflowNameField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        names = [definition.name for definition in registry.definitions()]
        return {"type": "string", "enum": names, "description": "A registered workflow name."}
