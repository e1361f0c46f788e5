"""What an MCP client's answers do (DESIGN 4.5): `accept` is the user's decision, `decline`
a rejection with its reason where the question is a yes/no one, `cancel` leaves it open;
what a form cannot carry (other approvers' votes, a signature) is said with the link; the
rules of the question refuse through clean protocol errors; a 2025-11-25 client gets text."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp_types import ElicitResult

from tests.asking import ask
from tests.factories import ApproverFactory, UserFactory
from tests.protocols.mcp_live import (  # noqa: F401
    WORKFLOW,
    accept,
    connect,
    form_round,
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
EXPENSE = {"amount": 80, "what": "taxi"}


def answering(*results: ElicitResult) -> Any:
    """An elicitation callback giving these results in turn."""
    given = list(results)

    async def callback(context: Any, params: Any) -> ElicitResult:
        return given.pop(0)

    return callback


def test_decline_rejects_with_its_reason(mcp_url):
    user = starter()
    token = token_for(user)
    declined = ElicitResult(action="decline", content={"reason": "too dear"})

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=answering(declined)) as client:
            return await client.call_tool(START, EXPENSE)

    result = run(scenario())

    decision = Decision.objects.get()
    assert (decision.actor, decision.response, decision.comment) == (
        user,
        {"approved": False},
        "too dear",
    )
    assert result.structured_content["status"] == "COMPLETED"
    assert Invocation.objects.get().output == {"paid": {"rejected": {"approved": False}}}


def test_decline_of_a_question_without_a_yes_or_no_is_refused(mcp_url):
    token = token_for(starter())
    rounds = answering(
        ElicitResult(action="accept", content={"approved": True}), ElicitResult(action="decline")
    )

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=rounds) as client:
            return await client.call_tool(START, EXPENSE)

    assert refused(scenario())["error"] == "decline_not_an_answer"
    assert Decision.objects.count() == 1  # the first round's approval only
    assert Interrupt.objects.get(status=InterruptStatus.PENDING).path.endswith("/payout@1")


def test_cancel_leaves_the_question_open(mcp_url):
    token = token_for(starter())

    async def scenario() -> Any:
        async with connect(
            mcp_url, token, elicitation_callback=answering(ElicitResult(action="cancel"))
        ) as client:
            return await client.call_tool(START, EXPENSE)

    result = run(scenario())

    assert "Left open" in result.content[0].text
    assert not Decision.objects.exists()
    assert Interrupt.objects.get().status == InterruptStatus.PENDING


def test_one_accept_on_a_quorum_question_says_it_needs_other_votes(mcp_url):
    user, other = starter("sam"), ApproverFactory(username="olga")
    token = token_for(user)
    interrupt = ask(user=user, assignees=["user:sam", "user:olga"], quorum=2)
    yes = ElicitResult(action="accept", content={"approved": True})

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=answering(yes)) as client:
            return await client.call_tool(
                "get_invocation", {"invocation_id": str(interrupt.invocation_id)}
            )

    result = run(scenario())

    assert Decision.objects.get().actor == user
    assert Interrupt.objects.get().status == InterruptStatus.PENDING
    text = result.content[0].text
    assert "Waiting for others" in text and "other approvers" in text
    assert f"/{interrupt.pk}/change/" in text
    assert other.pk != user.pk


def test_a_signed_question_is_answered_on_its_page(mcp_url):
    user = starter()
    token = token_for(user)
    interrupt = ask(user=user, assignees=["user:sam"], require_signature=True)

    async def shown() -> Any:
        async with connect(mcp_url, token) as client:
            return await client.call_tool(
                "get_invocation", {"invocation_id": str(interrupt.invocation_id)}
            )

    async def answered() -> Any:
        async with connect(mcp_url, token) as client:
            arguments = {"question_id": interrupt.pk, "response": {"approved": True}}
            return await client.call_tool("answer_question", arguments)

    text = run(shown()).content[0].text  # no form: MCP cannot carry a passkey's signature
    assert "passkey signature" in text and f"/{interrupt.pk}/change/" in text
    error = refused(answered())
    assert (error["code"], error["error"]) == (-32003, "signature_required")
    assert not Decision.objects.exists()


def test_the_starter_may_not_approve_under_four_eyes(mcp_url):
    user = starter()
    token = token_for(user)

    async def scenario() -> Any:
        async with connect(mcp_url, token) as client:
            started = await client.call_tool(START, {**EXPENSE, "four_eyes": True})
            assert "Waiting for others" in started.content[0].text  # no form for the starter
            question = started.structured_content["questions"][0]["id"]
            arguments = {"question_id": question, "response": {"approved": True}}
            return await client.call_tool("answer_question", arguments)

    assert refused(scenario())["code"] == -32003
    assert not Decision.objects.exists()


def test_someone_not_assigned_may_not_answer(mcp_url):
    ApproverFactory(username="amy")
    outsider = token_for(starter("eve"))
    interrupt = ask(assignees=["user:amy"])

    async def scenario() -> Any:
        async with connect(mcp_url, outsider) as client:
            arguments = {"question_id": interrupt.pk, "response": {"approved": True}}
            return await client.call_tool("answer_question", arguments)

    assert refused(scenario())["code"] == -32003
    assert not Decision.objects.exists()


def test_answer_question_and_list_questions(mcp_url):
    user = starter()
    token = token_for(user)
    interrupt = ask(user=user, assignees=["user:sam"], message="Ship it?")

    async def scenario() -> tuple[Any, Any]:
        async with connect(mcp_url, token) as client:
            listed = await client.call_tool("list_questions", {})
            arguments = {
                "question_id": interrupt.pk,
                "response": {"approved": True},
                "comment": "go",
            }
            return listed, await client.call_tool("answer_question", arguments)

    listed, answered = run(scenario())

    assert [q["id"] for q in listed.structured_content["questions"]] == [interrupt.pk]
    assert "Ship it?" in listed.content[0].text
    assert answered.structured_content["status"] == "COMPLETED"
    assert Decision.objects.get().comment == "go"


def test_a_2025_11_25_client_gets_the_question_and_its_link_as_text(mcp_url):
    token = token_for(starter())

    async def scenario() -> Any:
        async with connect(mcp_url, token, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            return await client.call_tool(START, EXPENSE)

    result = run(scenario())

    interrupt = Interrupt.objects.get()
    text = result.content[0].text
    assert "Waiting for your answer" in text and "Approve 80 EUR for taxi?" in text
    assert f"/{interrupt.pk}/change/" in text
    assert interrupt.status == InterruptStatus.PENDING


def test_starting_needs_the_permission_to_start(mcp_url):
    token = token_for(ApproverFactory(username="amy"))  # may answer, may not start

    async def scenario() -> Any:
        async with connect(mcp_url, token) as client:
            return await client.call_tool(START, EXPENSE)

    assert refused(scenario())["code"] == -32003
    assert not Invocation.objects.exists()


def test_someone_elses_invocation_is_unknown(mcp_url):
    owner = starter("sam")
    interrupt = ask(user=owner, assignees=["user:sam"])
    outsider = token_for(UserFactory(username="eve"))

    async def scenario() -> Any:
        async with connect(mcp_url, outsider) as client:
            return await client.call_tool(
                "get_invocation", {"invocation_id": str(interrupt.invocation_id)}
            )

    assert refused(scenario())["error"] == "unknown_invocation"


def test_a_request_without_a_valid_token_is_turned_away(mcp_url):
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        answer = httpx2.post(mcp_url, json=listing, headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_client_that_shows_no_forms_gets_the_question_and_its_link_as_text(mcp_url):
    token = token_for(starter())

    async def scenario() -> Any:
        async with connect(mcp_url, token, elicitation_callback=None) as client:
            return await client.call_tool(START, EXPENSE)

    result = run(scenario())

    interrupt = Interrupt.objects.get()
    assert "Waiting for your answer" in result.content[0].text
    assert f"/{interrupt.pk}/change/" in result.content[0].text
    assert interrupt.status == InterruptStatus.PENDING
