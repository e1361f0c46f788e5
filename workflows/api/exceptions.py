"""One error format for the whole API: `{"error": code, "detail": message, "field": name}`.

Every named error of the engine and services carries a `code`; STATUS_BY_CODE turns it into
an HTTP status. DRF's own exceptions (validation, authentication, parsing, throttling) get
the same shape, so a client reads one format whatever went wrong.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, RequestDataTooBig
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..engine.errors import WorkflowError
from ..registry import UnknownWorkflowError

STATUS_BY_CODE: dict[str, int] = {
    "unknown_interrupt": status.HTTP_404_NOT_FOUND,
    "unknown_invocation": status.HTTP_404_NOT_FOUND,
    "unknown_grant": status.HTTP_404_NOT_FOUND,
    "unknown_delegation": status.HTTP_404_NOT_FOUND,
    "unknown_workflow": status.HTTP_400_BAD_REQUEST,
    "invalid_response": status.HTTP_400_BAD_REQUEST,
    "invalid_input": status.HTTP_400_BAD_REQUEST,
    "invalid_grant": status.HTTP_400_BAD_REQUEST,
    "multiple_invocations": status.HTTP_400_BAD_REQUEST,
    "unencodable_value": status.HTTP_400_BAD_REQUEST,
    "interrupt_not_pending": status.HTTP_409_CONFLICT,
    "interrupt_superseded": status.HTTP_409_CONFLICT,
    "not_rewindable": status.HTTP_409_CONFLICT,
    "effects_would_repeat": status.HTTP_409_CONFLICT,
    "already_decided": status.HTTP_409_CONFLICT,
    "decision_required": status.HTTP_409_CONFLICT,
    "already_claimed": status.HTTP_409_CONFLICT,
    "invalid_invocation_state": status.HTTP_409_CONFLICT,
    "duplicate_interrupt": status.HTTP_409_CONFLICT,
    "definition_changed": status.HTTP_409_CONFLICT,
    "grant_unavailable": status.HTTP_409_CONFLICT,
    "payload_too_large": status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    "idempotency_key_reused": status.HTTP_422_UNPROCESSABLE_ENTITY,
}

# Attributes of a named error its body carries: why a rewind was refused, which effects
# would repeat.
ERROR_DETAILS = ("reason", "effects")

# The request field a named error is about, when the error itself does not say.
FIELD_BY_CODE: dict[str, str] = {
    "unknown_workflow": "workflow",
    "invalid_input": "input",
    "multiple_invocations": "function_responses",
}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"
    default_detail = "The request body is too large."


class IdempotencyKeyReused(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "idempotency_key_reused"
    default_detail = "This Idempotency-Key was used with a different request."


class StrictJSONParser(JSONParser):
    """DRF's JSON parser (NaN and Infinity refused), also refusing nesting so deep that
    Python's parser gives up, which would otherwise surface as a server error."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nesting too deep") from None


def error_body(code: str, detail: Any, field: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, "field": field, **extra}


def _first_error(detail: Any, path: tuple[str, ...] = ()) -> tuple[str | None, Any]:
    """The dotted field name and message of the first leaf of a DRF validation detail."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = () if key == "non_field_errors" else (str(key),)
            return _first_error(value, path + name)
    if isinstance(detail, list) and detail:
        if len(detail) > 1 or isinstance(detail[0], (dict, list)):
            for index, item in enumerate(detail):
                if item:  # list serializers report {} for the items that passed
                    inner = (str(index),) if isinstance(item, (dict, list)) else ()
                    return _first_error(item, path + inner)
        return _first_error(detail[0], path)
    return (".".join(path) or None), str(detail)


def _workflow_error_response(
    exc: WorkflowError | UnknownWorkflowError, request_fields: dict[str, str]
) -> Response:
    code = exc.code
    field = getattr(exc, "field", None) or FIELD_BY_CODE.get(code)
    field = request_fields.get(field, field) if field else None
    status_code = STATUS_BY_CODE.get(code, status.HTTP_400_BAD_REQUEST)
    if getattr(exc, "too_large", False):  # a value over a size limit, whatever its code
        code, status_code = "payload_too_large", status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    # What a refused rewind says besides its message (DESIGN 3.8).
    extra = {name: getattr(exc, name) for name in ERROR_DETAILS if hasattr(exc, name)}
    return Response(error_body(code, str(exc), field, **extra), status=status_code)


def _validation_detail(exc: DjangoValidationError) -> dict[str, list[str]]:
    """A Django ValidationError as DRF's detail: by field, NON_FIELD_ERRORS as DRF names it."""
    if not hasattr(exc, "error_dict"):
        return {"non_field_errors": exc.messages}
    return {
        "non_field_errors" if field == NON_FIELD_ERRORS else field: messages
        for field, messages in exc.message_dict.items()
    }


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler of the API views (set on their base class)."""
    if isinstance(exc, (WorkflowError, UnknownWorkflowError)):
        # A view whose request names a field otherwise than the services do says how.
        request_fields = getattr(context.get("view"), "request_fields", {})
        return _workflow_error_response(exc, request_fields)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(str(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoValidationError):  # a service's refusal naming its field
        exc = exceptions.ValidationError(_validation_detail(exc))
    elif isinstance(exc, DjangoPermissionDenied):  # its code, when it has one of its own
        detail = exc.args[0] if exc.args else None
        exc = exceptions.PermissionDenied(detail, code=getattr(exc, "code", None))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # not an expected error: a server error that must show up as one
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_error(exc.detail)
        response.data = error_body("invalid_request", message, field, errors=exc.detail)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes()
        code = code if isinstance(code, str) else exc.default_code
        response.data = error_body(code, str(exc.detail))
    return response
