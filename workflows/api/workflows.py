"""The API's workflows: the registered definitions, with their graphs (read only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from ..graph import workflow_graph
from ..registry import UnknownWorkflowError, registry
from .schema import LIST_ERRORS, READ_ERRORS, errors
from .serializers import WorkflowSerializer
from .views import ApiViewMixin


@extend_schema_view(
    list=extend_schema(
        summary="Registered workflows", responses={200: WorkflowSerializer, **errors(*LIST_ERRORS)}
    ),
    retrieve=extend_schema(
        summary="One workflow with its graph",
        responses={200: WorkflowSerializer, **errors(404, *READ_ERRORS)},
    ),
)
class WorkflowViewSet(ApiViewMixin, viewsets.GenericViewSet):
    """The registered workflow definitions (latest version of each), with their graphs."""

    serializer_class = WorkflowSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    # A list of the definitions stands in for a queryset (paginated the same way).
    def get_queryset(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [self._describe(d) for d in registry.definitions()]

    @staticmethod
    def _describe(definition: Any) -> dict[str, Any]:
        graph = workflow_graph(definition.workflow)
        return {"name": definition.name, "version": definition.version, "graph": graph}

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request: Request, name: str) -> Response:
        try:
            definition = registry.get(name)
        except UnknownWorkflowError as exc:
            raise NotFound(str(exc), code=exc.code) from None
        return Response(self.get_serializer(self._describe(definition)).data)
