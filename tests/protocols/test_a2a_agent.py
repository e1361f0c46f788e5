"""The A2A agent (DESIGN 4.5) driven by the `a2a-sdk` client over real HTTP: a task is an
invocation, its questions ADK's long-running function calls, answered by function_response
parts through the services; every refusal is the protocol's named error, nothing stored."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from a2a.types import a2a_pb2 as a2a
from google.protobuf.json_format import MessageToDict

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from tests.protocols.a2a_serving import a2a_client, serve_a2a_site, token_of  # noqa: F401
from workflows.models import Decision, Interrupt, Invocation
from workflows.protocols.a2a_agent.tasks import data_part

pytestmark = pytest.mark.django_db(transaction=True)

FUNCTION_RESPONSE = {"adk_type": "function_response"}


def starter(username: str = "sam") -> Any:
    """A user who may start workflows and answer the questions assigned to them."""
    user = grant_answer(ApproverFactory(username=username), "add_invocation")
    return user


def start_message(request: dict[str, Any], **ids: str) -> a2a.Message:
    request = {"message": "Approve?", "response_schema": APPROVAL, **request}
    return a2a.Message(
        message_id=str(uuid.uuid4()),
        role=a2a.ROLE_USER,
        parts=[data_part({"workflow": WORKFLOW, "input": {"request": request}})],
        **ids,
    )


def answer_message(task: a2a.Task, call_id: str, response: Any, **ids: str) -> a2a.Message:
    ids = {"task_id": task.id, "context_id": task.context_id, **ids}
    part = data_part({"id": call_id, "name": "question", "response": response}, FUNCTION_RESPONSE)
    return a2a.Message(message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=[part], **ids)


async def send(base_url: str, token: str, message: a2a.Message, **options: Any) -> a2a.Task:
    client = await a2a_client(base_url, token, **options)
    last = None
    async for event in client.send_message(a2a.SendMessageRequest(message=message)):
        last = event
    await client.close()
    assert last is not None and last.HasField("task")
    return last.task


def function_calls(task: a2a.Task) -> list[dict[str, Any]]:
    return [
        {"data": MessageToDict(p.data), "metadata": MessageToDict(p.metadata)}
        for p in task.status.message.parts
        if p.HasField("data")
    ]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_task_pauses_on_our_question_and_completes_with_the_answer(a2a_site, binding):
    sam = starter()
    token = token_of(sam)

    asked = run(send(a2a_site, token, start_message({"assignees": ["user:sam"]}), binding=binding))

    invocation = Invocation.objects.get()
    interrupt = Interrupt.objects.get()
    assert asked.id == str(invocation.pk)
    assert asked.context_id == str(invocation.session_id)
    assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED
    (call,) = function_calls(asked)
    assert call["metadata"] == {"adk_type": "function_call", "adk_is_long_running": True}
    assert call["data"]["id"] == interrupt.pk
    assert call["data"]["name"] == "question"
    assert call["data"]["args"]["response_schema"] == APPROVAL
    assert call["data"]["args"]["message"] == "Approve?"

    done = run(
        send(
            a2a_site,
            token,
            answer_message(asked, interrupt.pk, {"approved": True}),
            binding=binding,
        )
    )

    assert done.status.state == a2a.TASK_STATE_COMPLETED
    (artifact,) = done.artifacts
    assert MessageToDict(artifact.parts[0].data) == {"approved": True}
    assert Decision.objects.get().actor == sam
