"""The A2A agent with a real `celery worker` process on PostgreSQL: the run happens in the
worker, so a blocking SendMessage waits on the store until the task needs input, and a
streamed answer reports the task working, then its output, then completed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.types import a2a_pb2 as a2a
from django.contrib.auth.models import Group
from google.protobuf.json_format import MessageToDict

from tests.factories import ApproverFactory, grant_answer
from tests.protocols.a2a_serving import (  # noqa: F401
    FUNCTION_RESPONSE,
    a2a_client,
    function_calls,
    run,
    send,
    serve_a2a_site,
    token_of,
)
from workflows.models import Invocation
from workflows.protocols.a2a_agent.tasks import data_part

from .worker import celery_worker, require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

EXPENSE = {"amount": 250, "employee": "Ada"}


@pytest.fixture
def postgres(transactional_db):
    require_postgres("a worker process must see the test database")


def manager() -> Any:
    user = grant_answer(ApproverFactory(username="mia"), "add_invocation")
    user.groups.add(Group.objects.get_or_create(name="managers")[0])
    return user


async def stream(base_url: str, token: str, message: a2a.Message) -> list[a2a.StreamResponse]:
    client = await a2a_client(base_url, token, streaming=True)
    try:
        return [e async for e in client.send_message(a2a.SendMessageRequest(message=message))]
    finally:
        await client.close()


def test_an_a2a_task_runs_on_the_worker_and_streams_its_end(postgres, celery_broker, a2a_site):
    token = token_of(manager())
    start = a2a.Message(
        message_id=str(uuid.uuid4()),
        role=a2a.ROLE_USER,
        parts=[data_part({"workflow": "test_expense", "input": EXPENSE})],
    )
    with celery_worker(celery_broker):
        asked = run(send(a2a_site, token, start))

        assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED  # after the worker's run
        (call,) = function_calls(asked)
        assert call["data"]["name"] == "manager_approval"
        reply = {
            "id": call["data"]["id"],
            "name": "manager_approval",
            "response": {"approved": True},
        }
        answer = a2a.Message(
            message_id=str(uuid.uuid4()),
            role=a2a.ROLE_USER,
            task_id=asked.id,
            parts=[data_part(reply, FUNCTION_RESPONSE)],
        )
        first, *updates = run(stream(a2a_site, token, answer))

    # The task as the answer left it (WORKING while the worker resumes, unless it was that
    # quick), then its changes until it is final: the output before the last.
    states = [first.task.status.state] + [
        u.status_update.status.state for u in updates if u.HasField("status_update")
    ]
    assert states[-1] == a2a.TASK_STATE_COMPLETED
    assert set(states[:-1]) <= {a2a.TASK_STATE_WORKING}
    artifacts = [*first.task.artifacts] + [
        u.artifact_update.artifact for u in updates if u.HasField("artifact_update")
    ]
    assert [MessageToDict(a.parts[0].data)["status"] for a in artifacts] == ["reimbursed"]
    assert Invocation.objects.get().status == "COMPLETED"
