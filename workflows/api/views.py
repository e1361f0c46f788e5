"""The API views: invocations, interrupts and function responses, and the mixins every
resource's views share.

Every state change goes through `workflows.services`; views check shape and permission,
call one service and serialize what it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from .. import services
from ..conf import hitl_settings
from ..engine.errors import InvocationNotFoundError, UnknownInterruptError, WorkflowError
from ..engine.status import InterruptStatus
from ..engine.values import is_possible_id
from ..inbox import INBOX_ORDER, UnknownViewError, waiting_for
from ..models import Interrupt, Invocation, NodeRun, SessionEvent
from ..policy import answerable_interrupts, releasable_interrupts, visible_invocations
from ..services import passkeys
from .exceptions import PayloadTooLarge, StrictJSONParser, exception_handler
from .filters import InterruptFilter, InvocationFilter
from .idempotency import idempotent, start_key
from .pagination import EventCursorPagination, InboxPagination, PagePagination
from .permissions import (
    CanAnswerInterrupt,
    CanControlInvocation,
    CanStartInvocation,
)
from .rewinds import RewindActions
from .schema import IDEMPOTENCY_KEY, LIST_ERRORS, POST_ERRORS, READ_ERRORS, errors
from .serializers import (
    AcceptedSerializer,
    ChallengeRequestSerializer,
    ChallengeSerializer,
    DecisionRequestSerializer,
    DecisionSerializer,
    EventSerializer,
    FunctionResponsesSerializer,
    InterruptDetailSerializer,
    InterruptSummarySerializer,
    InvocationDetailSerializer,
    InvocationSerializer,
    StartSerializer,
)

if TYPE_CHECKING:  # what the mixins below are mixed into
    from rest_framework.views import APIView

    _View = APIView
    _ViewSet = viewsets.GenericViewSet
else:
    _View = _ViewSet = object


def reject_oversized(request: Request, limit: int) -> None:
    """413 before anything reads the body: its declared length is over the limit."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise PayloadTooLarge(f"the request body has {length} bytes; the limit is {limit}")


class ApiViewMixin(_View):
    """What every API view shares: JSON only, one error format, the size limit, and a
    signed-in caller."""

    parser_classes = [StrictJSONParser]
    pagination_class: type[BasePagination] | None = PagePagination
    # Asked before the host's default permission classes (REST_FRAMEWORK's), whatever
    # those say: a host that keeps DRF's AllowAny must not open the API to anonymous users.
    required_permissions: list[type[BasePermission]] = [IsAuthenticated]
    # Permission classes an action needs besides those.
    extra_permissions: dict[str, list[type[BasePermission]]] = {}

    def get_permissions(self) -> list[BasePermission]:
        action_name = getattr(self, "action", None) or ""
        classes: list[Any] = [
            *self.required_permissions,
            *self.permission_classes,
            *self.extra_permissions.get(action_name, []),
        ]
        return [permission() for permission in classes]

    def get_exception_handler(self) -> Any:
        return exception_handler

    def body_limit(self) -> int:
        """The largest request body read: an answer's limit (services check each value)."""
        return hitl_settings.MAX_RESPONSE_BYTES

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        reject_oversized(request, self.body_limit())
        super().initial(request, *args, **kwargs)


class ObjectLookupMixin(_ViewSet):
    """A missing object is the named error of its kind (404 with its code). List filters
    narrow lists only: an object is found by its id whatever the query string says."""

    not_found_error: type[WorkflowError]

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        if self.action != "list":
            return queryset
        return super().filter_queryset(queryset)

    def get_object(self) -> Any:
        lookup = self.kwargs[self.lookup_field]
        if not is_possible_id(lookup):  # one no row has: not even asked of the database
            raise self.not_found_error(lookup)
        try:
            return super().get_object()
        except Http404:
            raise self.not_found_error(self.kwargs[self.lookup_field]) from None


# The people an interrupt names (by id and username in its serializers).
PEOPLE_OF_INTERRUPTS = ("claimed_by", "resolved_by")

# Cancel and retry find the invocation among all of them, so the rule answers 403, not 404.
CONTROL_ACTIONS = {"cancel", "retry"}


@extend_schema_view(
    list=extend_schema(
        summary="Invocations you started (all of them with workflows.view_invocation)",
        responses={200: InvocationSerializer(many=True), **errors(*LIST_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="An invocation with its node runs and open interrupts",
        responses={200: InvocationDetailSerializer, **errors(404, *READ_ERRORS)},
    ),
)
class InvocationViewSet(
    ApiViewMixin,
    ObjectLookupMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Runs of a workflow: start one (workflows.add_invocation), follow its status, node
    runs, open questions and session events, cancel or retry it. You see the invocations
    you started, or all of them with workflows.view_invocation; people are named by
    `<person>_id` and `<person>_username`."""

    queryset = Invocation.objects.select_related("started_by")
    serializer_class = InvocationSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = InvocationFilter
    lookup_value_regex = "[^/]+"
    not_found_error = InvocationNotFoundError
    extra_permissions = {
        "create": [CanStartInvocation],
        "cancel": [CanControlInvocation],
        "retry": [CanControlInvocation],
    }

    def get_queryset(self) -> QuerySet[Invocation]:
        queryset = super().get_queryset()
        if self.action in CONTROL_ACTIONS:
            return queryset
        queryset = visible_invocations(self.request.user, queryset)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(
                Prefetch("node_runs", queryset=NodeRun.objects.order_by("id")),
                Prefetch(
                    "interrupts",
                    queryset=Interrupt.objects.filter(
                        status=InterruptStatus.PENDING
                    ).select_related(*PEOPLE_OF_INTERRUPTS),
                    to_attr="open_interrupts",
                ),
            )
        return queryset

    def body_limit(self) -> int:
        if self.action == "create":  # an input may be as large as any stored value
            return hitl_settings.MAX_VALUE_BYTES
        return super().body_limit()

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "retrieve":
            return InvocationDetailSerializer
        if self.action == "create":
            return StartSerializer
        return InvocationSerializer

    @extend_schema(
        summary="Start an invocation of a workflow",
        request=StartSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: InvocationSerializer, **errors(*POST_ERRORS)},
    )
    @idempotent
    def create(self, request: Request) -> Response:
        started = StartSerializer(data=request.data)
        started.is_valid(raise_exception=True)
        invocation = services.start(
            started.validated_data["workflow"],
            started.validated_data["input"],
            user=request.user,
            idempotency_key=start_key(request),
        )
        return Response(InvocationSerializer(invocation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="The invocation's session events, oldest first",
        responses={200: EventSerializer(many=True), **errors(404, *LIST_ERRORS)},
    )
    @action(
        detail=True, methods=["get"], pagination_class=EventCursorPagination, filter_backends=[]
    )
    def events(self, request: Request, pk: str) -> Response:
        invocation = self.get_object()
        events = SessionEvent.objects.filter(invocation=invocation)
        page = self.paginate_queryset(events)
        return self.get_paginated_response(EventSerializer(page, many=True).data)

    @extend_schema(
        summary="Cancel: pending interrupts become cancelled, the invocation CANCELLED",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: InvocationSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def cancel(self, request: Request, pk: str) -> Response:
        invocation = services.cancel(self.get_object(), actor=request.user)
        return Response(InvocationSerializer(invocation).data)

    @extend_schema(
        summary="Retry a FAILED invocation: its failed node runs run again",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: InvocationSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def retry(self, request: Request, pk: str) -> Response:
        invocation = services.retry(self.get_object(), actor=request.user)
        return Response(InvocationSerializer(invocation).data, status=status.HTTP_202_ACCEPTED)


LIST_DEFERRED = ["payload", "response_schema", "response", "on_timeout"]
# A question the caller may not see is a 404 whatever they ask of it (as its detail is);
# one they see but may not act on, a 403. Releasing is for the claimer or a supervisor:
# services.release decides.
ANSWERING_ACTIONS = {"decisions", "challenge", "claim"}


@extend_schema_view(
    list=extend_schema(
        summary="The inbox: interrupts you may answer (filter status=pending for open ones, "
        "or view=... for one inbox view), urgent first, then the soonest due, then the oldest",
        responses={200: InterruptSummarySerializer(many=True), **errors(*LIST_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="An interrupt with its payload and the JSON Schema of its answer",
        responses={200: InterruptDetailSerializer, **errors(404, *READ_ERRORS)},
    ),
)
class InterruptViewSet(
    ApiViewMixin,
    ObjectLookupMixin,
    RewindActions,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Questions a workflow waits on. You see the ones you may answer (assigned to you, a
    group of yours or nobody in particular, or to someone you stand in for); a question you
    may not see is a 404 for its detail and for every action on it, one you see but may not
    act on a 403. People are named by `<person>_id` and `<person>_username`."""

    queryset = Interrupt.objects.select_related(*PEOPLE_OF_INTERRUPTS)
    serializer_class = InterruptSummarySerializer
    pagination_class = InboxPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = InterruptFilter
    lookup_value_regex = "[^/]+"
    not_found_error = UnknownInterruptError
    extra_permissions = {name: [CanAnswerInterrupt] for name in ANSWERING_ACTIONS}

    def get_queryset(self) -> QuerySet[Interrupt]:
        queryset = super().get_queryset()
        if self.action == "release":
            return releasable_interrupts(self.request.user, queryset).select_related("invocation")
        if self.action != "list":
            return answerable_interrupts(self.request.user, queryset).select_related("invocation")
        queryset = queryset.defer(*LIST_DEFERRED)  # the wide JSON columns are for the detail
        view = self.request.query_params.get("view")
        if view is None:
            return answerable_interrupts(self.request.user, queryset).order_by(*INBOX_ORDER)
        try:
            return waiting_for(self.request.user, view, queryset)
        except UnknownViewError as exc:
            raise ValidationError({"view": [str(exc)]}) from exc

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "list":
            return InterruptSummarySerializer
        return InterruptDetailSerializer

    @extend_schema(
        summary="Record your decision; once the quorum is met, the decisions are the answer",
        request=DecisionRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: DecisionSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def decisions(self, request: Request, pk: str) -> Response:
        interrupt = self.get_object()
        given = DecisionRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        decision = services.decide(
            interrupt.pk,
            given.validated_data["response"],
            actor=request.user,
            comment=given.validated_data["comment"],
            assertion=given.validated_data["assertion"],
            action_fingerprint=given.validated_data["action_fingerprint"],
        )
        return Response(DecisionSerializer(decision).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="The challenge your passkey signs to decide this answer (with this comment)",
        request=ChallengeRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: ChallengeSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def challenge(self, request: Request, pk: str) -> Response:
        interrupt = self.get_object()
        given = ChallengeRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        challenge = services.signing_challenge(
            interrupt.pk,
            given.validated_data["response"],
            actor=request.user,
            comment=given.validated_data["comment"],
        )
        rp_id = passkeys.relying_party(request).id
        options = passkeys.assertion_options(request.user, challenge, rp_id)
        return Response(options)

    @extend_schema(
        summary="Mark that you are working on it (a hint to colleagues, not a lock)",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: InterruptDetailSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def claim(self, request: Request, pk: str) -> Response:
        interrupt = services.claim(self.get_object().pk, actor=request.user)
        return Response(InterruptDetailSerializer(interrupt).data)

    @extend_schema(
        summary="Drop the claim (its claimer, or a supervisor with reassign_interrupt)",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: InterruptDetailSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def release(self, request: Request, pk: str) -> Response:
        interrupt = services.release(self.get_object().pk, actor=request.user)
        return Response(InterruptDetailSerializer(interrupt).data)


class FunctionResponseViewSet(ApiViewMixin, viewsets.GenericViewSet):
    """Machine answers: the results of long-running tools, one or several at once."""

    serializer_class = FunctionResponsesSerializer

    @extend_schema(
        summary="Answer pending interrupts of one invocation; it resumes in the background",
        description="A question that needs several approvals (quorum above 1) is answered "
        "by decisions only: answering it here is a 409 `decision_required`. So is, for a "
        "person, one asked with `require_signature` (a 403 `signature_required`: the "
        "signature comes with a decision).",
        request=FunctionResponsesSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={202: AcceptedSerializer, **errors(404, 409, *POST_ERRORS)},
    )
    @idempotent
    def create(self, request: Request) -> Response:
        given = FunctionResponsesSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        answers = given.validated_data["function_responses"]
        ids = [answer["id"] for answer in answers]
        # The service checks the answer policy for the caller (403) and names unknown ids
        # (404).
        invocation = services.submit_function_responses(answers, actor=request.user)
        accepted = {"invocation": InvocationSerializer(invocation).data, "interrupts": ids}
        return Response(accepted, status=status.HTTP_202_ACCEPTED)
