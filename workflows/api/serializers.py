"""What the API reads and writes. Output serializers mirror the models; input serializers
check the shape of a request, and services check the rest (schemas, statuses)."""

from __future__ import annotations

import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from ..datetimes import read_datetime
from ..models import Decision, Interrupt, Invocation, NodeRun, SessionEvent

# Any JSON value, documented as such (the default JSONField schema says nothing).
AnyJSON = extend_schema_field(OpenApiTypes.ANY)(serializers.JSONField)


class DateTimeInput(serializers.DateTimeField):
    """A date and time a client sends, read as every door reads one (workflows.datetimes):
    in UTC; a 400 naming the field for an offset past ±15:59."""

    def to_internal_value(self, value: Any) -> datetime.datetime:
        if isinstance(value, datetime.datetime):
            return super().to_internal_value(value)
        if not isinstance(value, str):
            self.fail("invalid", format="ISO 8601")
        try:
            return read_datetime(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc), code="invalid") from None


class UserIdField(serializers.IntegerField):
    """A person's user id (null: nobody), read from the model's `<person>_id` column."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"read_only": True, "allow_null": True, **kwargs})


class UsernameField(serializers.CharField):
    """A person's username (null: nobody), read from the user at `source`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"read_only": True, "allow_null": True, **kwargs})

    def to_representation(self, value: Any) -> str:
        return str(value.get_username())


def person_fields(name: str, who: str, nullable: bool) -> dict[str, serializers.Field]:
    """The API names every person twice: `<name>_id` and `<name>_username` (`who` says
    what the person is to the object, for the schema)."""
    return {
        f"{name}_id": UserIdField(allow_null=nullable, help_text=f"The user id of {who}."),
        f"{name}_username": UsernameField(
            source=name, allow_null=nullable, help_text=f"The username of {who}."
        ),
    }


class PersonFieldsMixin(serializers.ModelSerializer):
    """Adds `person_fields` for each (name, who) in `Meta.person_fields`: every person an
    object names, by id and by username."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        model: Any = self.Meta.model
        for name, who in getattr(self.Meta, "person_fields", ()):
            fields.update(person_fields(name, who, model._meta.get_field(name).null))
        return fields


class ErrorSerializer(serializers.Serializer):
    """The body of every error response."""

    error = serializers.CharField(help_text="A stable code, e.g. `interrupt_not_pending`.")
    detail = serializers.CharField(help_text="What went wrong, for a person.")
    field = serializers.CharField(
        allow_null=True, help_text="The request field at fault, when there is one."
    )
    # The API's field names: a declared field may shadow a serializer attribute.
    errors = AnyJSON(required=False, help_text="Every validation message, by field.")  # type: ignore[assignment]


class GraphNodeSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(["start", "node", "join", "parallel_worker", "workflow"])
    parent = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    entry = serializers.CharField(required=False)
    exits = serializers.ListField(child=serializers.CharField(), required=False)


class GraphEdgeSerializer(serializers.Serializer):
    source = serializers.CharField()  # type: ignore[assignment]
    target = serializers.CharField()
    route = serializers.CharField(allow_null=True)


class GraphSerializer(serializers.Serializer):
    name = serializers.CharField()
    nodes = GraphNodeSerializer(many=True)
    edges = GraphEdgeSerializer(many=True)


class WorkflowSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    graph = GraphSerializer()


class EscalationStepSerializer(serializers.Serializer):
    """One step of a question's escalation ladder, as the node asked it."""

    after = serializers.FloatField(help_text="Seconds after the question was asked.")
    remind = serializers.BooleanField(help_text="Whether the step reminds the assignees.")
    assignees = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="Who the question is for from this step on; null: unchanged.",
    )


class InterruptSummarySerializer(PersonFieldsMixin):
    workflow = serializers.CharField(source="workflow_name")
    escalation = EscalationStepSerializer(
        many=True,
        read_only=True,
        help_text="The escalation ladder, in the order its steps apply (empty: none).",
    )
    escalation_step = serializers.IntegerField(
        read_only=True, help_text="How many steps of the ladder have been applied."
    )
    next_escalation_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When the next step is due (null: none left); a question no longer "
        "pending takes no further step.",
    )
    claimed_by = UserIdField(source="claimed_by_id", help_text="Same as `claimed_by_id`.")
    resolved_by = UserIdField(source="resolved_by_id", help_text="Same as `resolved_by_id`.")

    class Meta:
        model = Interrupt
        fields = [
            "id",
            "invocation",
            "workflow",
            "path",
            "run_id",
            "message",
            "status",
            "assignees",
            "quorum",
            "four_eyes",
            "require_signature",
            "claimed_by",
            "claimed_at",
            "priority",
            "due_at",
            "escalation",
            "escalation_step",
            "next_escalation_at",
            "deadline",
            "created_at",
            "resolved_by",
            "resolved_at",
        ]
        person_fields = [
            ("claimed_by", "who claimed it (null: nobody)"),
            ("resolved_by", "who resolved it (null: not resolved by a person)"),
        ]


class InterruptDetailSerializer(InterruptSummarySerializer):
    payload = AnyJSON(read_only=True, help_text="What the node attached to its question.")
    response_schema = AnyJSON(
        read_only=True,
        help_text="JSON Schema an answer must satisfy (null: any JSON value); validate "
        "before sending.",
    )
    response = AnyJSON(read_only=True, help_text="The accepted answer, once resolved.")

    class Meta(InterruptSummarySerializer.Meta):
        fields = [*InterruptSummarySerializer.Meta.fields, "payload", "response_schema", "response"]


class NodeRunSerializer(serializers.ModelSerializer):
    output = AnyJSON(read_only=True)

    class Meta:
        model = NodeRun
        fields = [
            "path",
            "name",
            "run_id",
            "status",
            "output",
            "route",
            "interrupt_ids",
            "attempt",
            "error",
            "created_at",
            "updated_at",
        ]


class InvocationSerializer(PersonFieldsMixin):
    workflow = serializers.CharField(source="workflow_name")
    input = AnyJSON(read_only=True)
    output = AnyJSON(read_only=True)
    started_by = UserIdField(source="started_by_id", help_text="Same as `started_by_id`.")

    class Meta:
        model = Invocation
        fields = [
            "id",
            "session",
            "workflow",
            "workflow_version",
            "status",
            "input",
            "output",
            "error",
            "started_by",
            "created_at",
            "updated_at",
            "finished_at",
        ]
        person_fields = [("started_by", "who started it (null: the system)")]


class InvocationDetailSerializer(InvocationSerializer):
    node_runs = NodeRunSerializer(many=True, read_only=True)
    open_interrupts = InterruptSummarySerializer(many=True, read_only=True)

    class Meta(InvocationSerializer.Meta):
        fields = [*InvocationSerializer.Meta.fields, "node_runs", "open_interrupts"]


class WorkflowNameField(serializers.CharField):
    """The name of a registered workflow. The schema lists the names registered when it
    is generated (schema.WorkflowNameFieldExtension); services.start refuses any other name
    with `unknown_workflow`."""


class StartSerializer(serializers.Serializer):
    workflow = WorkflowNameField(max_length=200, help_text="A registered workflow name.")
    input = AnyJSON(required=False, allow_null=True, default=None, help_text="The node input.")


class EventSerializer(serializers.ModelSerializer):
    output = AnyJSON(read_only=True)
    function_calls = AnyJSON(read_only=True)
    function_responses = AnyJSON(read_only=True)

    class Meta:
        model = SessionEvent
        fields = "__all__"  # an event is all it records


class FunctionResponseSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=255, help_text="The interrupt id.")
    name = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="Informational."
    )
    response = AnyJSON(allow_null=True, help_text="The answer; see the interrupt's schema.")


class FunctionResponsesSerializer(serializers.Serializer):
    function_responses = serializers.ListField(
        child=FunctionResponseSerializer(), min_length=1, max_length=100
    )


# A request body's component is named for what it asks (drf-spectacular appends "Request"
# to request components): ChallengeRequest, not ChallengeRequestRequest.
@extend_schema_serializer(component_name="Challenge")
class ChallengeRequestSerializer(serializers.Serializer):
    response = AnyJSON(help_text="The answer; see the interrupt's schema (null is none).")
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=10000)


class AssertionResponseSerializer(serializers.Serializer):
    clientDataJSON = serializers.CharField(help_text="base64url")
    authenticatorData = serializers.CharField(help_text="base64url")
    signature = serializers.CharField(help_text="base64url")
    userHandle = serializers.CharField(required=False, allow_null=True, help_text="base64url")


class AssertionSerializer(serializers.Serializer):
    """A WebAuthn assertion in its JSON form (what `PublicKeyCredential.toJSON()` gives for
    navigator.credentials.get()): binary values base64url without padding."""

    id = serializers.CharField(help_text="The credential id, base64url.")
    rawId = serializers.CharField(help_text="The same id.")
    type = serializers.ChoiceField(["public-key"])
    response = AssertionResponseSerializer()
    authenticatorAttachment = serializers.CharField(required=False, allow_null=True)
    clientExtensionResults = AnyJSON(required=False)


@extend_schema_serializer(component_name="Decision")
class DecisionRequestSerializer(ChallengeRequestSerializer):
    assertion = AssertionSerializer(
        required=False,
        allow_null=True,
        default=None,
        help_text="Your passkey's signature of the decision's challenge "
        "(`POST interrupts/{id}/challenge/`): required when the interrupt has "
        "`require_signature`.",
    )
    action_fingerprint = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="For an approval gate's question: the `action_fingerprint` of the action "
        "you decided on (SHA-256 of its canonical `{node, args}`); refused if the question "
        "asks about another action.",
    )


class CredentialDescriptorSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="A credential id of yours, base64url.")
    type = serializers.ChoiceField(["public-key"])
    transports = serializers.ListField(child=serializers.CharField(), required=False)


class ChallengeSerializer(serializers.Serializer):
    """Options for navigator.credentials.get() in their JSON form
    (`PublicKeyCredential.parseRequestOptionsFromJSON` reads them as they are)."""

    challenge = serializers.CharField(
        help_text="base64url of the 32 bytes derived from the question and the answer."
    )
    timeout = serializers.IntegerField(help_text="Milliseconds.")
    rpId = serializers.CharField()
    allowCredentials = CredentialDescriptorSerializer(many=True)
    userVerification = serializers.CharField()


class DecisionSerializer(PersonFieldsMixin):
    response = AnyJSON(read_only=True)
    actor = UserIdField(source="actor_id", allow_null=False, help_text="Same as `actor_id`.")
    interrupt_status = serializers.CharField(
        source="interrupt.status",
        read_only=True,
        help_text="`resolved` once this decision met the quorum; `pending` while more are due.",
    )

    class Meta:
        model = Decision
        fields = [
            "id",
            "interrupt",
            "actor",
            "response",
            "comment",
            "created_at",
            "interrupt_status",
        ]
        person_fields = [
            ("actor", "who decided"),
            ("on_behalf_of", "whom the actor stood in for (null: decided in their own right)"),
        ]


class AcceptedSerializer(serializers.Serializer):
    """What POST function-responses/ answers: the invocation that will resume."""

    invocation = InvocationSerializer()
    interrupts = serializers.ListField(child=serializers.CharField())
