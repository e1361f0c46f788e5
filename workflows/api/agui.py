"""`POST agui/{workflow}/`: a workflow behind an AG-UI chat (DESIGN 4.5); what it answers
is workflows.protocols.agui's. The API's authentication; the RunAgentInput's schema and
the thread are checked before anything streams (named 400 and 404)."""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from ..protocols import agui, stream
from ..registry import UnknownWorkflowError, registry
from .exceptions import error_body
from .permissions import CanStartInvocation
from .stream import EventStreamView, StreamBusy


class AguiRunView(EventStreamView):
    parser_classes = [JSONParser]  # AG-UI clients send application/json

    # The AG-UI protocol documents this endpoint (docs/agents.md), not the API's schema.
    @extend_schema(exclude=True)
    def post(self, request: Request, workflow: str) -> Any:
        try:
            registry.get(workflow)
        except UnknownWorkflowError as exc:
            raise NotFound(str(exc), code=exc.code) from None
        try:
            given = agui.run_input(request.data)
        except agui.RunInputError as exc:
            body = error_body(exc.code, str(exc), errors=exc.errors)
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        if not given.resume and not request.user.has_perm("workflows.add_invocation"):
            raise PermissionDenied(CanStartInvocation.message)
        try:
            slot = stream.capacity.take()
        except stream.StreamCapacityError as exc:
            raise StreamBusy(str(exc)) from None
        try:
            run = agui.begin(workflow, given, request.user)
        except agui.UnknownThreadError as exc:
            slot.release()
            raise NotFound(str(exc), code=exc.code) from None
        except BaseException:
            slot.release()
            raise
        if run.refused is not None or run.invocation_id is None:
            slot.release()
            return StreamingHttpResponse(agui.refusal(run), content_type="text/event-stream")
        reader = stream.StreamReader(run.invocation_id, request.user)
        render = agui.renderer(run)
        if isinstance(request._request, ASGIRequest):
            content: Any = stream.follow_async(reader, run.after, slot, render, agui.stopped)
        else:
            content = stream.follow(reader, run.after, slot, render, agui.stopped)
        return stream.event_stream(content, slot)
