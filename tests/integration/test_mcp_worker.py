"""MCP against a real `celery worker` on PostgreSQL (DESIGN 4.5): the `mcp` SDK's client
starts a workflow over HTTP, the worker runs it to its question, the client's elicitation
answer resumes it in the worker, and the call returns the output once the worker is done."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from mcp_types import ElicitResult

from tests.protocols.mcp_live import connect, live_mcp_url, run, starter, token_for  # noqa: F401
from workflows.engine.status import NodeStatus
from workflows.models import Decision, Invocation

from .worker import celery_worker, require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.broker]


def test_an_mcp_client_drives_a_workflow_that_a_worker_runs(
    transactional_db, celery_broker, mcp_url
):
    require_postgres("a worker process must see the test database")
    manager = starter("mia")
    manager.groups.add(Group.objects.get_or_create(name="managers")[0])
    token = token_for(manager)
    asked: list[str] = []

    async def approve(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approved": True, "comment": "fine"})

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=approve) as client:
            return await client.call_tool("start_test_expense", {"amount": 250, "employee": "Ada"})

    with celery_worker(celery_broker):
        result = run(scenario())

    invocation = Invocation.objects.get()
    assert invocation.status == NodeStatus.COMPLETED, invocation.error
    assert result.structured_content["status"] == "COMPLETED"
    assert result.structured_content["output"] == invocation.output
    assert asked and "Approve an expense of 250.00 for Ada?" in asked[0]
    assert Decision.objects.get().actor == manager
