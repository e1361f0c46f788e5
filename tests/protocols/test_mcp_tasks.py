"""The Tasks extension (`io.modelcontextprotocol/tasks`) over HTTP with the `mcp` SDK's
client: a started workflow is a task (its id the invocation's) that stays `input_required`
while its question waits; `tasks/get` reads it, `tasks/update` answers it, `tasks/cancel`
cancels the invocation."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from mcp.client import ClientExtension
from mcp.client.extension import ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import TypeAdapter

from tests.factories import UserFactory
from tests.protocols.mcp_live import (  # noqa: F401
    WORKFLOW,
    accept,
    connect,
    live_mcp_url,
    refused,
    run,
    starter,
    token_for,
)
from workflows.engine import InterruptStatus
from workflows.models import Decision, Interrupt, Invocation

pytestmark = pytest.mark.django_db(transaction=True)

START = f"start_{WORKFLOW}"
EXPENSE = {"amount": 50, "what": "lunch"}
ANY = TypeAdapter(dict[str, Any])


class CreatedTask(Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


class TaskRequest(Request[TaskParams, str]):
    name_param: ClassVar[str | None] = "taskId"


async def _unused(task: CreatedTask, context: Any) -> CallToolResult:
    raise AssertionError("the test drives the task itself")


class Tasks(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_unused)]


async def send(client: Any, method: str, task_id: str, **fields: Any) -> dict[str, Any]:
    request = TaskRequest(method=method, params=TaskParams(task_id=task_id, **fields))
    return await client.session.send_request(request, ANY)


def test_a_task_waits_on_its_questions_and_is_answered_by_tasks_update(mcp_url):
    user = starter()
    token = token_for(user)

    async def scenario() -> list[dict[str, Any]]:
        async with connect(mcp_url, token, extensions=[Tasks()]) as client:
            created = await client.session.call_tool(START, EXPENSE, allow_claimed=True)
            assert isinstance(created, CreatedTask) and created.status == "input_required"
            seen = [await send(client, "tasks/get", created.task_id)]
            (first,) = seen[0]["inputRequests"]
            await send(
                client,
                "tasks/update",
                created.task_id,
                input_responses={first: accept({"approved": True})},
            )
            seen.append(await send(client, "tasks/get", created.task_id))
            (second,) = seen[1]["inputRequests"]
            await send(
                client,
                "tasks/update",
                created.task_id,
                input_responses={second: accept({"method": "card", "amount": 50})},
            )
            seen.append(await send(client, "tasks/get", created.task_id))
            return seen

    seen = run(scenario())

    invocation = Invocation.objects.get()
    assert {s["taskId"] for s in seen} == {str(invocation.pk)}
    assert [s["status"] for s in seen] == ["input_required", "input_required", "completed"]
    form = seen[0]["inputRequests"]
    assert next(iter(form.values()))["method"] == "elicitation/create"
    assert seen[2]["result"]["structuredContent"]["output"] == {
        "paid": {"method": "card", "amount": 50}
    }
    assert Decision.objects.filter(actor=user).count() == 2


def test_tasks_cancel_cancels_the_invocation(mcp_url):
    token = token_for(starter())

    async def scenario() -> dict[str, Any]:
        async with connect(mcp_url, token, extensions=[Tasks()]) as client:
            created = await client.session.call_tool(START, EXPENSE, allow_claimed=True)
            return await send(client, "tasks/cancel", created.task_id)

    cancelled = run(scenario())

    assert cancelled["status"] == "cancelled"
    assert Invocation.objects.get().status == "CANCELLED"
    assert Interrupt.objects.get().status == InterruptStatus.CANCELLED


def test_another_users_task_is_unknown_to_them(mcp_url):
    owner, other = token_for(starter("sam")), token_for(UserFactory(username="eve"))

    async def started() -> str:
        async with connect(mcp_url, owner, extensions=[Tasks()]) as client:
            return (await client.session.call_tool(START, EXPENSE, allow_claimed=True)).task_id

    task_id = run(started())
    question = Interrupt.objects.get().pk

    async def update() -> Any:
        async with connect(mcp_url, other, extensions=[Tasks()]) as client:
            return await send(
                client,
                "tasks/update",
                task_id,
                input_responses={question: accept({"approved": True})},
            )

    async def cancel() -> Any:
        async with connect(mcp_url, other, extensions=[Tasks()]) as client:
            return await send(client, "tasks/cancel", task_id)

    assert refused(update())["error"] == "unknown_task"
    assert refused(cancel())["error"] == "unknown_task"
    assert Invocation.objects.get().status == "WAITING"
    assert not Decision.objects.exists()
