"""Change an answer already given (DESIGN 3.8): `GET interrupts/{id}/rewind/` (the plan),
`POST interrupts/{id}/rewind/` and `POST interrupts/{id}/reopen/`, mixed into the
interrupts' view set. Each calls one service; refusals are the API's 409 bodies
(`not_rewindable` with its `reason`, `effects_would_repeat` with its `effects`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from .. import services
from ..engine.rewind import RewindPlan
from .idempotency import idempotent
from .schema import IDEMPOTENCY_KEY, POST_ERRORS, READ_ERRORS, errors
from .serializers import AnyJSON, InterruptDetailSerializer, InvocationSerializer

if TYPE_CHECKING:
    from rest_framework.viewsets import GenericViewSet

    _ViewSet = GenericViewSet
else:
    _ViewSet = object


class EffectSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The node run that performed it.")
    name = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    in_doubt = serializers.BooleanField(help_text="Started and never finished.")


class RewindPlanSerializer(serializers.Serializer):
    """What changing the answer would do; nothing is changed by reading it."""

    reopened = serializers.ListField(
        child=serializers.CharField(),
        help_text="The node run that asked, then each ancestor: they continue from the new answer.",
    )
    superseded = serializers.ListField(
        child=serializers.CharField(),
        help_text="Node runs that depended on the old answer: kept as history, run anew.",
    )
    questions = serializers.ListField(
        child=serializers.CharField(),
        help_text="Questions superseded (asked again if the new runs ask them).",
    )
    effects = EffectSerializer(
        many=True, help_text="Effects that would happen again: confirm them to go on."
    )


@extend_schema_field(
    {
        "oneOf": [
            {"type": "boolean"},
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ]
    }
)
class ConfirmEffectsField(serializers.Field):
    """true (every effect shown), false, or the [path, name] pairs confirmed."""

    def to_representation(self, value: Any) -> Any:
        return value

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            return data
        if isinstance(data, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in data
        ):
            return [tuple(p) for p in data]
        raise serializers.ValidationError(
            "true, false, or a list of [path, name] pairs of the effects shown by the plan"
        )


@extend_schema_serializer(component_name="Rewind")
class RewindRequestSerializer(serializers.Serializer):
    response = AnyJSON(help_text="The new answer; see the interrupt's schema.")
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=10000)
    confirm_effects = ConfirmEffectsField(
        required=False,
        default=False,
        help_text="Effects that would happen again, confirmed: true for all, or the "
        "[path, name] pairs of the plan's `effects`.",
    )


@extend_schema_serializer(component_name="Reopen")
class ReopenRequestSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=10000)


def plan_data(plan: RewindPlan) -> dict[str, Any]:
    return dict(RewindPlanSerializer(plan).data)


class RewindActions(_ViewSet):
    """The rewind actions of the interrupts' view set."""

    @extend_schema(
        methods=["GET"],
        summary="What changing this answer would do: the steps run again, the questions "
        "asked again, the effects that would repeat",
        responses={200: RewindPlanSerializer, **errors(404, 409, *READ_ERRORS)},
    )
    @extend_schema(
        methods=["POST"],
        summary="Change the answer already given; only what depended on it runs again",
        request=RewindRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: InvocationSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["get", "post"])
    @idempotent
    def rewind(self, request: Request, pk: str) -> Response:
        interrupt = self.get_object()
        if request.method == "GET":
            plan = services.plan_rewind(interrupt.pk, actor=request.user)
            return Response(plan_data(plan))
        given = RewindRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        invocation = services.rewind(
            interrupt.pk,
            given.validated_data["response"],
            actor=request.user,
            comment=given.validated_data["comment"],
            confirm_effects=given.validated_data["confirm_effects"],
        )
        return Response(InvocationSerializer(invocation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Open a new round of decisions on a question people decide (quorum or "
        "signature); the round's answer replaces the earlier one",
        request=ReopenRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: InterruptDetailSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reopen(self, request: Request, pk: str) -> Response:
        interrupt = self.get_object()
        given = ReopenRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        reopened = services.reopen(
            interrupt.pk, actor=request.user, comment=given.validated_data["comment"]
        )
        return Response(InterruptDetailSerializer(reopened).data, status=status.HTTP_202_ACCEPTED)
