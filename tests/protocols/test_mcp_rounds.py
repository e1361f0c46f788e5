"""The `mcp` SDK's own client drives a workflow over HTTP through `input_required` rounds to
completion (DESIGN 4.5, MCP at `mcp/`)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from mcp_types import ElicitResult

from tests.protocols.mcp_live import (  # noqa: F401
    WORKFLOW,
    connect,
    live_mcp_url,
    run,
    starter,
    token_for,
)
from workflows.models import Decision, Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_workflow_runs_to_its_end_through_two_elicitation_rounds(mcp_url):
    user = starter()
    token = token_for(user)
    asked: list[dict[str, Any]] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params.requested_schema)
        if "approved" in params.requested_schema["properties"]:
            return ElicitResult(action="accept", content={"approved": True, "comment": "ok"})
        return ElicitResult(action="accept", content={"method": "bank", "amount": 120})

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=answer) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {
                f"start_{WORKFLOW}",
                "list_questions",
                "answer_question",
                "get_invocation",
            } <= names
            return await client.call_tool(f"start_{WORKFLOW}", {"amount": 120, "what": "train"})

    result = run(scenario())

    assert not result.is_error
    invocation = Invocation.objects.get()
    assert invocation.status == "COMPLETED"
    assert invocation.output == {"paid": {"method": "bank", "amount": 120}}
    assert result.structured_content["output"] == invocation.output
    assert [sorted(s["properties"]) for s in asked] == [
        ["approved", "comment"],
        ["amount", "method"],
    ]
    assert Decision.objects.filter(actor=user).count() == 2


def test_the_documented_client_example_runs(mcp_url, capsys):
    from docs.mcp_client import drive

    manager = starter("mia")
    manager.groups.add(Group.objects.get_or_create(name="managers")[0])
    token = token_for(manager)

    result = run(drive(mcp_url, token, "test_expense", {"amount": 250, "employee": "Ada"}, True))

    assert result.structured_content["status"] == "COMPLETED"
    assert "Approve an expense of 250.00 for Ada?" in capsys.readouterr().out
