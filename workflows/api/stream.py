"""`GET invocations/{id}/stream/`: an invocation's live stream (Server-Sent Events); what it
sends is workflows.protocols.stream's. The invocation detail's authorization."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from ..engine.errors import InvocationNotFoundError
from ..engine.values import is_possible_id
from ..models import Invocation
from ..policy import visible_invocations
from ..protocols import stream
from .schema import READ_ERRORS, errors
from .views import ApiViewMixin


class InvalidLastEventId(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = stream.InvalidPositionError.code


class StreamBusy(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = stream.StreamCapacityError.code


class EventStreamView(ApiViewMixin, APIView):
    """A view that answers text/event-stream; DRF renders only its errors, as JSON,
    whatever the client accepts (EventSource and AG-UI clients send
    `Accept: text/event-stream`)."""

    pagination_class = None

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        return JSONRenderer(), JSONRenderer.media_type


class InvocationStreamView(EventStreamView):
    @extend_schema(
        summary="The invocation's live stream (text/event-stream): session events and "
        "node-run status changes as they commit, resumable with Last-Event-ID",
        parameters=[
            OpenApiParameter("last_event_id", str, description="Resume after this id."),
            OpenApiParameter("Last-Event-ID", str, OpenApiParameter.HEADER, required=False),
        ],
        responses={
            (200, "text/event-stream"): OpenApiTypes.STR,
            **errors(400, 404, 503, *READ_ERRORS),
        },
    )
    def get(self, request: Request, pk: str) -> StreamingHttpResponse:
        try:
            key = Invocation._meta.pk.to_python(pk) if is_possible_id(pk) else None
        except DjangoValidationError:  # not even the shape of an id
            key = None
        visible = visible_invocations(request.user, Invocation.objects.all())
        if key is None or not visible.filter(pk=key).exists():
            raise InvocationNotFoundError(pk)
        given = request.headers.get("Last-Event-ID") or request.query_params.get("last_event_id")
        try:
            after = stream.parse_position(given)
        except stream.InvalidPositionError as exc:
            raise InvalidLastEventId(str(exc)) from None
        try:
            slot = stream.capacity.take()
        except stream.StreamCapacityError as exc:
            raise StreamBusy(str(exc)) from None
        reader = stream.StreamReader(str(key), request.user)
        asgi = isinstance(request._request, ASGIRequest)
        return stream.event_stream(stream.live_stream(reader, after, slot, asgi=asgi), slot)
