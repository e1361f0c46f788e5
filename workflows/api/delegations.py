"""The API of delegations (out of office): list the ones you may see, make one, end one.
Who may do each is `policy.DelegationPolicy`, asked by the services: a person delegates
their own work; staff with workflows.add_delegation anyone's."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_serializer, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from .. import services
from ..engine.errors import UnknownDelegationError
from ..models import Delegation
from ..policy import delegation_policy
from ..services.delegations import delegation_key
from .filters import DelegationFilter
from .idempotency import idempotent
from .schema import IDEMPOTENCY_KEY, LIST_ERRORS, POST_ERRORS, READ_ERRORS, errors
from .serializers import DateTimeInput, PersonFieldsMixin, UsernameField
from .views import ApiViewMixin, ObjectLookupMixin

# The largest id a BigAutoField holds: a larger one names no delegation.


class DelegationSerializer(PersonFieldsMixin):
    delegator = UsernameField(allow_null=False, help_text="Same as `delegator_username`.")
    delegate = UsernameField(allow_null=False, help_text="Same as `delegate_username`.")
    created_by = UsernameField(help_text="Same as `created_by_username`.")
    workflows = serializers.ListField(child=serializers.CharField(), read_only=True)
    active = serializers.SerializerMethodField(help_text="In force now.")

    class Meta:
        model = Delegation
        fields = [
            "id",
            "delegator",
            "delegate",
            "starts_at",
            "ends_at",
            "workflows",
            "ended_at",
            "active",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields
        person_fields = [
            ("delegator", "whose work it hands over"),
            ("delegate", "who stands in"),
            ("created_by", "who made it"),
        ]

    def get_active(self, delegation: Delegation) -> bool:
        now = timezone.now()
        return delegation.ended_at is None and delegation.starts_at <= now < delegation.ends_at


class UserByName(serializers.SlugRelatedField):
    """A user named by username; an unknown name is a 400 naming the field."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            slug_field=get_user_model().USERNAME_FIELD,
            queryset=get_user_model().objects.all(),
            error_messages={"does_not_exist": "no user {slug_name} {value}"},
            **kwargs,
        )


@extend_schema_serializer(component_name="Delegation")  # its component: DelegationRequest
class DelegationRequestSerializer(serializers.Serializer):
    """Who stands in for whom, when, in which workflows."""

    delegator = UserByName(
        required=False, help_text="Whose work (default: yours; anyone's needs add_delegation)."
    )
    delegate = UserByName(help_text="Who stands in.")
    starts_at = DateTimeInput()
    ends_at = DateTimeInput()
    workflows = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Registered workflow names; empty: every workflow.",
    )


@extend_schema_view(
    list=extend_schema(
        summary="Delegations you gave, received or made (all with a delegation permission)",
        responses={200: DelegationSerializer(many=True), **errors(*LIST_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="One delegation",
        responses={200: DelegationSerializer, **errors(404, *READ_ERRORS)},
    ),
)
class DelegationViewSet(
    ApiViewMixin,
    ObjectLookupMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Out of office: while a delegation is in force its delegate may answer what its
    delegator may, in the workflows it names (all when none). You see the delegations you
    gave, received or made, or all of them with a delegation permission; people are named
    by `<person>_id` and `<person>_username`."""

    queryset = Delegation.objects.select_related("delegator", "delegate", "created_by")
    serializer_class = DelegationSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = DelegationFilter
    lookup_value_regex = "[^/]+"
    not_found_error = UnknownDelegationError

    def get_queryset(self) -> QuerySet[Delegation]:
        queryset = super().get_queryset()
        if self.action == "end":  # found among all: the rule answers 403, not 404
            return queryset
        return delegation_policy().visible(self.request.user, queryset)

    def get_object(self) -> Any:
        delegation_key(self.kwargs[self.lookup_field])  # UnknownDelegationError: a 404
        return super().get_object()

    @extend_schema(
        summary="Delegate your work (or, with workflows.add_delegation, anyone's) for a while",
        request=DelegationRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: DelegationSerializer, **errors(*POST_ERRORS)},
    )
    @idempotent
    def create(self, request: Request) -> Response:
        given = DelegationRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(given.validated_data)
        delegation = services.delegate(
            data.get("delegator", request.user),
            data["delegate"],
            data["starts_at"],
            data["ends_at"],
            workflows=data["workflows"],
            actor=request.user,
        )
        return Response(DelegationSerializer(delegation).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="End a delegation now (its delegator, who made it, or workflows.change_delegation)",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: DelegationSerializer, **errors(404, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def end(self, request: Request, pk: str) -> Response:
        delegation = services.end_delegation(self.get_object(), actor=request.user)
        return Response(DelegationSerializer(delegation).data)
