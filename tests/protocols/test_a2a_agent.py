"""The A2A agent (DESIGN 4.5) driven by the `a2a-sdk` client over real HTTP: a task is an
invocation, its questions ADK's long-running function calls, answered by function_response
parts through the services; every refusal is the protocol's named error, nothing stored."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.proto_utils import validate_proto_required_fields
from asgiref.sync import sync_to_async
from google.protobuf.json_format import MessageToDict, ParseDict

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from tests.protocols.a2a_serving import (  # noqa: F401
    FUNCTION_RESPONSE,
    a2a_client,
    answer_message,
    function_calls,
    run,
    send,
    serve_a2a_site,
    start_message,
    starter,
    token_of,
)
from workflows import services
from workflows.engine import Event, FunctionCall, Workflow, node
from workflows.models import Decision, Interrupt, Invocation, SessionEvent
from workflows.protocols.a2a_agent.tasks import data_part
from workflows.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

LOOKUP = "a2a_test_lookup"


@node
def lookup(node_input: str) -> Any:
    """A long-running tool call: its result comes back as the task's function_response."""
    call_id = f"lookup-{uuid.uuid4()}"
    yield Event(
        function_calls=[FunctionCall(call_id, "lookup", {"who": node_input})],
        long_running_tool_ids=[call_id],
    )


@node
def looked_up(node_input: Any) -> Any:
    return node_input


if LOOKUP not in {d.name for d in registry.definitions()}:
    registry.register(Workflow(name=LOOKUP, edges=[("START", lookup, looked_up)]))


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


def snapshot() -> dict[str, int]:
    """What a refused message must leave as it was."""
    return {
        "invocations": Invocation.objects.count(),
        "decisions": Decision.objects.count(),
        "answered": Interrupt.objects.exclude(status="pending").count(),
        "events": SessionEvent.objects.count(),
    }


def asked_task(a2a_site: str, token: str, **request: Any) -> a2a.Task:
    return run(send(a2a_site, token, start_message({"assignees": ["user:sam"], **request})))


def test_the_agent_card_validates_and_names_each_workflow(a2a_site):
    served = httpx.get(a2a_site + "/.well-known/agent-card.json")

    card = ParseDict(served.json(), a2a.AgentCard())  # unknown fields refused
    validate_proto_required_fields(card)
    assert WORKFLOW in {skill.id for skill in card.skills}
    assert {i.protocol_binding: i.url for i in card.supported_interfaces} == {
        "JSONRPC": a2a_site + "/a2a/",
        "HTTP+JSON": a2a_site + "/a2a",
    }
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["bearer"]
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True


@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_a_call_without_a_valid_token_is_refused(a2a_site, token):
    starter()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}

    refused = httpx.post(a2a_site + "/a2a/", json=call, headers=headers)

    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert Invocation.objects.count() == 0


def test_a_message_to_an_unknown_task_is_task_not_found(a2a_site):
    token = token_of(starter())
    before = snapshot()
    message = answer_message(
        a2a.Task(id=str(uuid.uuid4()), context_id=str(uuid.uuid4())), "q", {"approved": True}
    )

    with pytest.raises(TaskNotFoundError):
        run(send(a2a_site, token, message))

    assert snapshot() == before


def test_another_users_task_is_not_found(a2a_site):
    asked = asked_task(a2a_site, token_of(starter()))
    mallory = token_of(starter("mallory"))
    before = snapshot()

    with pytest.raises(TaskNotFoundError):
        run(
            send(
                a2a_site,
                mallory,
                answer_message(asked, Interrupt.objects.get().pk, {"approved": True}),
            )
        )

    assert snapshot() == before


def test_a_context_that_is_not_the_tasks_is_invalid_params(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)
    before = snapshot()
    message = answer_message(
        asked, Interrupt.objects.get().pk, {"approved": True}, context_id=str(uuid.uuid4())
    )

    with pytest.raises(InvalidParamsError, match="is not the context of task"):
        run(send(a2a_site, token, message))

    assert snapshot() == before


def test_a_message_to_a_final_task_is_unsupported(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)
    question = Interrupt.objects.get().pk
    run(send(a2a_site, token, answer_message(asked, question, {"approved": True})))
    before = snapshot()

    with pytest.raises(UnsupportedOperationError, match="COMPLETED"):
        run(send(a2a_site, token, answer_message(asked, question, {"approved": False})))

    assert snapshot() == before


def test_a_forged_answer_to_a_question_for_someone_else_is_refused(a2a_site):
    ApproverFactory(username="amy")
    token = token_of(starter())
    asked = run(send(a2a_site, token, start_message({"assignees": ["user:amy"]})))
    question = Interrupt.objects.get()
    before = snapshot()

    assert asked.status.state == a2a.TASK_STATE_WORKING
    assert function_calls(asked) == []
    assert "Waiting for another person's answer" in asked.status.message.parts[0].text
    with pytest.raises(InvalidParamsError) as refused:
        run(send(a2a_site, token, answer_message(asked, question.pk, {"approved": True})))

    assert refused.value.data == {"code": "permission_denied"}
    assert snapshot() == before


def test_an_answer_the_schema_refuses_names_its_field_and_stores_nothing(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)
    before = snapshot()

    with pytest.raises(InvalidParamsError) as refused:
        run(send(a2a_site, token, answer_message(asked, Interrupt.objects.get().pk, {"ok": 1})))

    assert refused.value.data == {"code": "invalid_response"}
    assert snapshot() == before


def test_an_answer_for_a_question_of_another_task_is_refused(a2a_site):
    token = token_of(starter())
    first = asked_task(a2a_site, token)
    asked_task(a2a_site, token)
    other = Interrupt.objects.exclude(invocation_id=first.id).get()
    before = snapshot()

    with pytest.raises(InvalidParamsError, match="is not a question of this task"):
        run(send(a2a_site, token, answer_message(first, other.pk, {"approved": True})))

    assert snapshot() == before


def test_a_signed_question_is_not_answered_without_its_signature(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token, require_signature=True)
    (call,) = function_calls(asked)
    assert call["data"]["args"]["needs"] == ["signature"]
    before = snapshot()

    with pytest.raises(InvalidParamsError) as refused:
        run(send(a2a_site, token, answer_message(asked, call["data"]["id"], {"approved": True})))

    assert refused.value.data == {"code": "permission_denied"}
    assert snapshot() == before


def test_one_vote_of_a_quorum_is_a_decision_and_the_task_waits_on_the_others(a2a_site):
    ApproverFactory(username="amy")
    token = token_of(starter())
    asked = asked_task(a2a_site, token, assignees=["user:sam", "user:amy"], quorum=2)

    voted = run(
        send(
            a2a_site,
            token,
            answer_message(asked, function_calls(asked)[0]["data"]["id"], {"approved": True}),
        )
    )

    assert voted.status.state == a2a.TASK_STATE_WORKING
    assert Decision.objects.get().actor.username == "sam"
    assert Interrupt.objects.get().status == "pending"


def test_a_tool_calls_result_resumes_the_task(a2a_site):
    token = token_of(starter())
    message = a2a.Message(
        message_id=str(uuid.uuid4()),
        role=a2a.ROLE_USER,
        parts=[data_part({"workflow": LOOKUP, "input": "ada"})],
    )

    asked = run(send(a2a_site, token, message))
    (call,) = function_calls(asked)
    assert call["data"]["name"] == "lookup"
    assert call["data"]["args"] == {"who": "ada"}
    part = data_part(
        {"id": call["data"]["id"], "name": "lookup", "response": {"age": 36}}, FUNCTION_RESPONSE
    )
    answer = a2a.Message(
        message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=[part], task_id=asked.id
    )
    done = run(send(a2a_site, token, answer))

    assert done.status.state == a2a.TASK_STATE_COMPLETED
    assert MessageToDict(done.artifacts[0].parts[0].data) == {"age": 36}
    assert Decision.objects.count() == 0  # a machine's answer, not a person's decision


def test_cancel_ends_the_task_and_a_final_task_is_not_cancelable(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)

    async def cancel_twice() -> tuple[a2a.Task, Exception]:
        client = await a2a_client(a2a_site, token)
        cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=asked.id))
        try:
            await client.cancel_task(a2a.CancelTaskRequest(id=asked.id))
        except TaskNotCancelableError as exc:
            return cancelled, exc
        finally:
            await client.close()
        raise AssertionError("a cancelled task was cancelled again")

    cancelled, _refusal = run(cancel_twice())

    assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    assert Invocation.objects.get().status == "CANCELLED"


def test_get_and_list_read_the_callers_tasks(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)
    asked_task(a2a_site, token_of(starter("other")))

    async def read() -> tuple[a2a.Task, a2a.ListTasksResponse]:
        client = await a2a_client(a2a_site, token)
        try:
            got = await client.get_task(a2a.GetTaskRequest(id=asked.id))
            listed = await client.list_tasks(a2a.ListTasksRequest())
        finally:
            await client.close()
        return got, listed

    got, listed = run(read())

    assert (got.id, got.status.state) == (asked.id, a2a.TASK_STATE_INPUT_REQUIRED)
    assert function_calls(got)[0]["data"]["id"] == function_calls(asked)[0]["data"]["id"]
    assert [task.id for task in listed.tasks] == [asked.id]


def test_a_stream_follows_the_task_until_someone_else_answers(a2a_site):
    amy = ApproverFactory(username="amy")
    token = token_of(starter())
    asked = run(send(a2a_site, token, start_message({"assignees": ["user:amy"]})))
    question = Interrupt.objects.get().pk

    async def follow() -> list[a2a.StreamResponse]:
        client = await a2a_client(a2a_site, token, streaming=True)
        events = []
        try:
            async for event in client.subscribe(a2a.SubscribeToTaskRequest(id=asked.id)):
                events.append(event)
                if len(events) == 1:  # the task as it is: now amy answers
                    await sync_to_async(services.decide)(question, {"approved": True}, actor=amy)
        finally:
            await client.close()
        return events

    first, *updates = run(follow())

    assert first.task.status.state == a2a.TASK_STATE_WORKING
    assert [e.WhichOneof("payload") for e in updates] == ["artifact_update", "status_update"]
    assert MessageToDict(updates[0].artifact_update.artifact.parts[0].data) == {"approved": True}
    assert updates[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED


def test_a_streamed_message_ends_on_our_question(a2a_site):
    token = token_of(starter())

    asked = run(send(a2a_site, token, start_message({"assignees": ["user:sam"]}), streaming=True))

    assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED


def test_starting_needs_the_permission_to_start(a2a_site):
    token = token_of(grant_answer(ApproverFactory(username="sam"), "answer_interrupt"))

    with pytest.raises(InvalidParamsError, match=r"workflows\.add_invocation") as refused:
        run(send(a2a_site, token, start_message({"assignees": ["user:sam"]})))

    assert refused.value.data == {"code": "permission_denied"}
    assert Invocation.objects.count() == 0


def test_a_repeated_start_message_is_the_same_task(a2a_site):
    token = token_of(starter())
    message = start_message({"assignees": ["user:sam"]})

    first = run(send(a2a_site, token, message))
    again = run(send(a2a_site, token, message))

    assert again.id == first.id
    assert Invocation.objects.count() == 1


def test_an_a2a_0_3_client_reads_the_task(a2a_site):
    token = token_of(starter())
    asked = asked_task(a2a_site, token)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": asked.id}}

    read = httpx.post(a2a_site + "/a2a/", json=call, headers={"Authorization": f"Bearer {token}"})

    task = read.json()["result"]
    assert (task["id"], task["status"]["state"]) == (asked.id, "input-required")
