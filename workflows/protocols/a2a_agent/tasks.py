"""An invocation as an A2A task (DESIGN 4.5, "A2A 1.0"): the task id is the invocation's,
the context id its session's; the state says what the caller can do now, and a question
the caller may answer travels as a long-running FunctionCall data part in ADK's
convention, its args the envelope (the message, payload, response schema, links)."""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

from a2a.types import a2a_pb2 as a2a
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Prefetch, QuerySet
from google.protobuf.json_format import ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.engine.values import is_possible_id
from workflows.models import Interrupt, Invocation
from workflows.policy import visible_invocations
from workflows.protocols.envelope import envelope

# ADK's keys for a function call or response carried in an A2A data part
# (google.adk.a2a.converters.part_converter).
ADK_TYPE = "adk_type"
ADK_LONG_RUNNING = "adk_is_long_running"
FUNCTION_CALL = "function_call"
FUNCTION_RESPONSE = "function_response"

FINAL_STATES: dict[str, Any] = {
    NodeStatus.COMPLETED.value: a2a.TASK_STATE_COMPLETED,
    NodeStatus.FAILED.value: a2a.TASK_STATE_FAILED,
    NodeStatus.CANCELLED.value: a2a.TASK_STATE_CANCELED,
}
OUTPUT_ARTIFACT = "output"
WAITING_ON_OTHERS = "waiting_on_others"  # task metadata: open questions others answer


class UnknownTask(LookupError):
    """No task by that id that the caller may see."""


def jsonable(value: Any) -> Any:
    """`value` with dates as ISO 8601 text: what a protobuf Struct can hold."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def data_part(data: Any, metadata: dict[str, Any] | None = None) -> a2a.Part:
    part = a2a.Part()
    ParseDict(jsonable(data), part.data)
    if metadata:
        part.metadata.update(metadata)
    return part


def text_part(text: str) -> a2a.Part:
    return a2a.Part(text=text)


def with_open_questions(invocations: QuerySet[Invocation]) -> QuerySet[Invocation]:
    """The invocations with what their tasks show: the open questions, their decisions."""
    return invocations.prefetch_related(
        Prefetch(
            "interrupts",
            queryset=Interrupt.objects.filter(status=InterruptStatus.PENDING)
            .prefetch_related("decisions")
            .order_by("created_at", "pk"),
            to_attr="open_interrupts",
        )
    )


def visible_invocation(task_id: str, user: Any) -> Invocation:
    """The invocation `task_id` names, among those the caller may see; else UnknownTask."""
    if not is_possible_id(task_id):
        raise UnknownTask(task_id)
    found = visible_invocations(user, Invocation.objects.filter(pk__in=as_uuid_list(task_id)))
    invocation = with_open_questions(found).first()
    if invocation is None:
        raise UnknownTask(task_id)
    return invocation


def as_uuid_list(value: str) -> list[str]:
    """[value] when it can be an invocation's id (a UUID), else []: a lookup by a string
    that is not one finds nothing instead of failing."""
    try:
        return [str(uuid.UUID(value))]
    except ValueError:
        return []


def function_call_part(interrupt: Interrupt, shown: dict[str, Any]) -> a2a.Part:
    """The question (`shown`: its envelope) as ADK's long-running FunctionCall: a tool call
    keeps its own name and args; any other question is named after its node, its args the
    envelope."""
    if shown["kind"] == "tool_call":
        call = cast(dict[str, Any], interrupt.payload)
        name, args = call["name"], call["args"]
    else:
        name = interrupt.path.rsplit("/", 1)[-1].split("@", 1)[0]
        args = {key: value for key, value in shown.items() if key != "id"}
    return data_part(
        {"id": interrupt.pk, "name": name, "args": args},
        {ADK_TYPE: FUNCTION_CALL, ADK_LONG_RUNNING: True},
    )


def _status(invocation: Invocation, user: Any) -> a2a.TaskStatus:
    status = a2a.TaskStatus(timestamp=_timestamp(invocation.updated_at))
    message = a2a.Message(
        message_id=f"{invocation.pk}:{invocation.updated_at.timestamp()}",
        context_id=str(invocation.session_id),
        task_id=str(invocation.pk),
        role=a2a.ROLE_AGENT,
    )
    if invocation.status in FINAL_STATES:
        status.state = FINAL_STATES[invocation.status]
        if invocation.error:
            message.parts.append(text_part(invocation.error))
    else:
        status.state = a2a.TASK_STATE_WORKING
        shown = [(q, envelope(q, user)) for q in getattr(invocation, "open_interrupts", [])]
        calls = [function_call_part(q, e) for q, e in shown if e["answerable"]]
        if calls:
            status.state = a2a.TASK_STATE_INPUT_REQUIRED
            message.parts.extend(calls)
        elif shown:
            pages = "; ".join(e["links"]["page"] for _, e in shown if e["links"].get("page"))
            waiting = "Waiting for another person's answer" + (f": {pages}" if pages else "")
            message.parts.append(text_part(waiting))
    if message.parts:
        status.message.CopyFrom(message)
    return status


def _timestamp(moment: Any) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def task_of(invocation: Invocation, user: Any) -> a2a.Task:
    """The invocation (read by `visible_invocation`) as `user` sees it."""
    task = a2a.Task(
        id=str(invocation.pk),
        context_id=str(invocation.session_id),
        status=_status(invocation, user),
    )
    task.metadata.update({"workflow": invocation.workflow_name})
    if task.status.state == a2a.TASK_STATE_WORKING and getattr(invocation, "open_interrupts", []):
        task.metadata.update({WAITING_ON_OTHERS: True})
    if invocation.status == NodeStatus.COMPLETED:
        task.artifacts.append(
            a2a.Artifact(
                artifact_id=OUTPUT_ARTIFACT,
                name=OUTPUT_ARTIFACT,
                parts=[data_part(invocation.output)],
            )
        )
    return task


def read_task(task_id: str, user: Any) -> a2a.Task:
    return task_of(visible_invocation(task_id, user), user)


def is_settled(task: a2a.Task) -> bool:
    """Whether the task waits on someone, or is over: final, input required, or working
    on a question only others may answer (it moves when they answer, not before)."""
    state = task.status.state
    if state in FINAL_STATES.values() or state == a2a.TASK_STATE_INPUT_REQUIRED:
        return True
    return WAITING_ON_OTHERS in task.metadata


def ends_stream(task: a2a.Task) -> bool:
    """Whether a stream of the task ends: it is final or needs the caller's input (a
    question for others keeps the stream open until they answer)."""
    return is_final(task) or task.status.state == a2a.TASK_STATE_INPUT_REQUIRED


def is_final(task: a2a.Task) -> bool:
    return task.status.state in FINAL_STATES.values()
