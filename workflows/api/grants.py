"""The API of grants (remembered approvals of a gate): list them, make one apart from any
decision, revoke one. Who may do each is `policy.GranterPolicy`, asked by the services."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema, extend_schema_serializer, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from .. import policy
from ..engine.errors import InvalidGrantError, UnknownGrantError
from ..engine.status import GrantScope
from ..models import Grant, GrantQuerySet
from ..registry import registry
from ..services import grants
from .filters import StrictBooleanFilter
from .idempotency import idempotent
from .schema import IDEMPOTENCY_KEY, LIST_ERRORS, POST_ERRORS, READ_ERRORS, errors
from .serializers import AnyJSON, DateTimeInput, PersonFieldsMixin, UsernameField
from .views import ApiViewMixin, ObjectLookupMixin


class GrantSerializer(PersonFieldsMixin):
    granted_by = UsernameField(help_text="Same as `granted_by_username`.")
    revoked_by = UsernameField(help_text="Same as `revoked_by_username`.")
    pins = AnyJSON(read_only=True)
    live = serializers.SerializerMethodField(help_text="Not revoked, not expired, uses left.")
    uses = serializers.IntegerField(source="uses.count", read_only=True)

    class Meta:
        model = Grant
        fields = [
            "id",
            "workflow_name",
            "node_name",
            "scope",
            "scope_id",
            "pins",
            "expires_at",
            "uses_left",
            "uses",
            "live",
            "granted_by",
            "created_at",
            "revoked_at",
            "revoked_by",
            "interrupt_id",
        ]
        read_only_fields = fields
        person_fields = [
            ("granted_by", "who granted it"),
            ("revoked_by", "who revoked it (null: not revoked)"),
        ]

    def get_live(self, grant: Grant) -> bool:
        return grant.is_live(timezone.now())


@extend_schema_serializer(component_name="Grant")  # its component: GrantRequest
class GrantRequestSerializer(serializers.Serializer):
    """A grant made apart from any decision (needs workflows.add_grant)."""

    workflow_name = serializers.CharField(max_length=200)
    node_name = serializers.CharField(max_length=200, help_text="The gated node.")
    scope = serializers.ChoiceField([s.value for s in GrantScope])
    scope_id = serializers.CharField(
        max_length=255,
        required=False,
        default="",
        allow_blank=True,
        help_text="The invocation or session it is for (not for always).",
    )
    pins = AnyJSON(required=False, allow_null=True, help_text="A JSON Schema the args satisfy.")
    ttl_seconds = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    expires_at = DateTimeInput(required=False, allow_null=True)
    uses_left = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class GrantFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name")
    node = filters.CharFilter(field_name="node_name")
    live = StrictBooleanFilter(method="filter_live", label="Live (not revoked, expired, used up)")

    class Meta:
        model = Grant
        fields = ["workflow", "node", "scope", "scope_id", "live"]

    def filter_live(self, queryset: GrantQuerySet, name: str, value: bool) -> QuerySet[Grant]:
        return queryset.live() if value else queryset.ended()


@extend_schema_view(
    list=extend_schema(
        summary="Grants you made (all of them with workflows.view_grant)",
        responses={200: GrantSerializer(many=True), **errors(*LIST_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="One grant", responses={200: GrantSerializer, **errors(404, *READ_ERRORS)}
    ),
)
class GrantViewSet(
    ApiViewMixin,
    ObjectLookupMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Remembered approvals of an approval gate: while live, the gate's later dispatches in
    the grant's scope pass without asking. You see the grants you made, or all of them
    with workflows.view_grant; people are named by `<person>_id` and
    `<person>_username`."""

    queryset = Grant.objects.select_related("granted_by", "revoked_by")
    serializer_class = GrantSerializer
    filter_backends = [filters.DjangoFilterBackend]
    filterset_class = GrantFilter
    lookup_value_regex = "[^/]+"
    not_found_error = UnknownGrantError
    # The services' names of the fields of a grant, as the request names them.
    request_fields = {"workflow": "workflow_name", "node": "node_name"}

    def get_queryset(self) -> QuerySet[Grant]:
        queryset = super().get_queryset()
        if self.action == "revoke":  # found among all: the rule answers 403, not 404
            return queryset
        return policy.visible_grants(self.request.user, queryset)

    @extend_schema(
        summary="Make a grant apart from any decision (needs workflows.add_grant)",
        request=GrantRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: GrantSerializer, **errors(*POST_ERRORS)},
    )
    @idempotent
    def create(self, request: Request) -> Response:
        given = GrantRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(given.validated_data)
        workflow_name = data.pop("workflow_name")
        try:
            grant = grants.create_grant(
                workflow_name, data.pop("node_name"), data.pop("scope"), actor=request.user, **data
            )
        except InvalidGrantError:
            registry.get(workflow_name)  # no gate of an unknown workflow: say which is unknown
            raise
        return Response(GrantSerializer(grant).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Revoke a grant: later dispatches ask again (who granted it, or "
        "workflows.change_grant)",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: GrantSerializer, **errors(404, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def revoke(self, request: Request, pk: str) -> Response:
        grant = grants.revoke_grant(self.get_object(), actor=request.user)
        return Response(GrantSerializer(grant).data)
