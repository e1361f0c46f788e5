"""What an A2A message asks for, done through `workflows.services` (DESIGN 4.5).

A message without a task starts an invocation: its data part (or a text part holding a
JSON object) is `{"workflow": name, "input": value}`, as the API's start takes it. A
message on a task answers its open questions with `function_response` data parts
(`{"id", "name", "response"}`, metadata `adk_type: "function_response"`): a tool call's
result goes to `services.submit_function_responses`, a person's answer to
`services.decide`, which apply every rule of the question. A refusal raises the A2A error
that names it, and the one transaction they share stores nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.core.exceptions import PermissionDenied
from google.protobuf.json_format import MessageToDict

from workflows import services
from workflows.engine.errors import WorkflowError
from workflows.models import Interrupt, Invocation, Session
from workflows.policy import START_PERMISSION, visible_invocations
from workflows.protocols.a2a_agent.tasks import (
    ADK_TYPE,
    FINAL_STATES,
    FUNCTION_RESPONSE,
    UnknownTask,
    as_uuid_list,
    visible_invocation,
)
from workflows.protocols.envelope import question_kind
from workflows.registry import UnknownWorkflowError
from workflows.transactions import write_transaction

START_SHAPE = '{"workflow": name, "input": value}'


@contextmanager
def refusals_named() -> Iterator[None]:
    """The services' refusals as A2A errors: the client reads why, nothing was stored."""
    try:
        yield
    except UnknownTask as exc:
        raise TaskNotFoundError(f"no task {exc.args[0]!r} that you may see") from None
    except PermissionDenied as exc:
        raise InvalidParamsError(
            str(exc) or "permission denied", data={"code": "permission_denied"}
        ) from None
    except (WorkflowError, UnknownWorkflowError) as exc:
        raise InvalidParamsError(str(exc), data={"code": exc.code}) from None


def _whole_numbers(value: Any) -> Any:
    """`value` with integral floats as ints: protobuf's Value keeps every number as a
    double, and JSON Schema's "integer" wants 5, not 5.0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _part_dict(part: a2a.Part) -> Any:
    if part.HasField("data"):
        return _whole_numbers(MessageToDict(part.data))
    if part.text:
        try:
            return json.loads(part.text)
        except ValueError:
            return None
    return None


def start_request(message: a2a.Message) -> tuple[str, Any]:
    """The workflow and input a message without a task asks to start."""
    for part in message.parts:
        asked = _part_dict(part)
        if isinstance(asked, dict) and isinstance(asked.get("workflow"), str):
            unexpected = sorted(set(asked) - {"workflow", "input"})
            if unexpected:
                raise InvalidParamsError(
                    f"unexpected keys {unexpected}: a message that starts a task holds "
                    f"{START_SHAPE}"
                )
            return asked["workflow"], asked.get("input")
    raise InvalidParamsError(
        f"a message that starts a task holds a data part {START_SHAPE} (a skill of the agent "
        "card names each workflow)"
    )


def _adk_type(part: a2a.Part) -> Any:
    # A protobuf Struct has no get().
    return part.metadata[ADK_TYPE] if ADK_TYPE in part.metadata else None  # noqa: SIM401


def function_responses(message: a2a.Message) -> list[dict[str, Any]]:
    """The answers a message on a task carries."""
    answers = [
        _part_dict(part)
        for part in message.parts
        if part.HasField("data") and _adk_type(part) == FUNCTION_RESPONSE
    ]
    if not answers:
        raise InvalidParamsError(
            "a message on a task answers its open questions with data parts "
            '{"id", "name", "response"} whose metadata is '
            f'{{"{ADK_TYPE}": "{FUNCTION_RESPONSE}"}}'
        )
    for answer in answers:
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise InvalidParamsError(
                f'a function_response needs its question\'s "id"; got {answer}'
            )
    return answers


def _session(context_id: str, user: Any) -> Session:
    """The session a context id names, when the caller may see one of its invocations."""
    invocations = visible_invocations(user, Invocation.objects.all())
    found = invocations.filter(session_id__in=as_uuid_list(context_id)).first()
    if found is None:
        raise InvalidParamsError(f"no context {context_id!r} that you may continue")
    return found.session


def start(message: a2a.Message, user: Any) -> Invocation:
    """Start the workflow the message names; a repeat of the same message id is the same
    task (a client retrying after an unclear outcome)."""
    workflow, node_input = start_request(message)
    if not user.has_perm(START_PERMISSION):
        raise InvalidParamsError(
            f"starting a workflow needs the permission {START_PERMISSION}",
            data={"code": "permission_denied"},
        )
    session = _session(message.context_id, user) if message.context_id else None
    digest = hashlib.sha256(message.message_id.encode()).hexdigest()
    with refusals_named():
        return services.start(
            workflow,
            node_input,
            user=user,
            session=session,
            idempotency_key=f"a2a:{user.pk}:{digest}",
        )


def answer(message: a2a.Message, user: Any) -> Invocation:
    """Answer open questions of the task the message names."""
    with refusals_named():
        invocation = visible_invocation(message.task_id, user)
    if message.context_id and message.context_id != str(invocation.session_id):
        raise InvalidParamsError(
            f"context {message.context_id!r} is not the context of task {message.task_id!r}"
        )
    if invocation.status in FINAL_STATES:
        raise UnsupportedOperationError(
            f"task {message.task_id} is {invocation.status}: it takes no more messages"
        )
    answers = function_responses(message)
    with refusals_named():
        _answer(invocation, answers, user)
    return invocation


@write_transaction
def _answer(invocation: Invocation, answers: list[dict[str, Any]], user: Any) -> None:
    ids = [answer["id"] for answer in answers]
    questions = {q.pk: q for q in Interrupt.objects.filter(pk__in=ids, invocation=invocation)}
    machine = []
    for answer in answers:
        question = questions.get(answer["id"])
        if question is None:
            raise InvalidParamsError(f"{answer['id']!r} is not a question of this task")
        if question_kind(question) == "tool_call":
            machine.append(answer)
        else:
            services.decide(question.pk, answer.get("response"), actor=user)
    if machine:
        services.submit_function_responses(machine, actor=user)
