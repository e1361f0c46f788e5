"""The requestState of an MCP `input_required` round is signed, bound to the user, the
question and the request, expiring and single-use; an accept is the authenticated user's
decision under every rule. Each refusal is a JSON-RPC error and stores nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from mcp_types import ElicitResult

from tests.asking import ask
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
from workflows.models import Decision, Interrupt, McpRequestState

pytestmark = pytest.mark.django_db(transaction=True)

START = f"start_{WORKFLOW}"
EXPENSE = {"amount": 80, "what": "taxi"}
YES = {"approved": True}


async def first_round(client: Any, arguments: dict[str, Any] = EXPENSE) -> Any:
    result = await client.session.call_tool(START, arguments, allow_input_required=True)
    assert result.result_type == "input_required"
    return result


def nothing_answered() -> None:
    assert not Decision.objects.exists()
    assert not Interrupt.objects.exclude(status=InterruptStatus.PENDING).exists()


def test_a_tampered_request_state_is_refused(mcp_url):
    token = token_for(starter())

    async def scenario() -> None:
        async with connect(mcp_url, token) as client:
            question, state = form_round(await first_round(client))
            forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            await client.session.call_tool(
                START,
                EXPENSE,
                input_responses={question: accept(YES)},
                request_state=forged,
                allow_input_required=True,
            )

    error = refused(scenario())
    assert error["code"] == -32602 and error["reason"] == "invalid_request_state"
    nothing_answered()


def test_a_request_state_for_other_arguments_is_refused(mcp_url):
    token = token_for(starter())

    async def scenario() -> None:
        async with connect(mcp_url, token) as client:
            question, state = form_round(await first_round(client))
            await client.session.call_tool(
                START,
                {**EXPENSE, "amount": 1},
                input_responses={question: accept(YES)},
                request_state=state,
                allow_input_required=True,
            )

    assert refused(scenario())["reason"] == "invalid_request_state"
    nothing_answered()


def test_an_expired_request_state_is_refused(mcp_url, monkeypatch):
    token = token_for(starter())
    later = time.time() + 16 * 60  # past the state's 15 minutes

    async def scenario() -> None:
        async with connect(mcp_url, token) as client:
            question, state = form_round(await first_round(client))
            monkeypatch.setattr("mcp.server.request_state.time.time", lambda: later)
            await client.session.call_tool(
                START,
                EXPENSE,
                input_responses={question: accept(YES)},
                request_state=state,
                allow_input_required=True,
            )

    assert refused(scenario())["reason"] == "invalid_request_state"
    nothing_answered()


def test_another_users_request_state_is_refused(mcp_url):
    owner, other = token_for(starter("sam")), token_for(starter("eve"))

    async def scenario() -> None:
        async with connect(mcp_url, owner) as client:
            question, state = form_round(await first_round(client))
        async with connect(mcp_url, other) as client:
            await client.session.call_tool(
                START,
                EXPENSE,
                input_responses={question: accept(YES)},
                request_state=state,
                allow_input_required=True,
            )

    assert refused(scenario())["reason"] == "invalid_request_state"
    nothing_answered()


def test_a_request_state_answers_once(mcp_url):
    token = token_for(starter())

    async def scenario() -> None:
        async with connect(mcp_url, token) as client:
            question, state = form_round(await first_round(client))
            left_open = await client.session.call_tool(
                START,
                EXPENSE,
                input_responses={question: {"action": "cancel"}},
                request_state=state,
                allow_input_required=True,
            )
            assert "Left open" in left_open.content[0].text
            await client.session.call_tool(  # the same state again, now accepting
                START,
                EXPENSE,
                input_responses={question: accept(YES)},
                request_state=state,
                allow_input_required=True,
            )

    assert refused(scenario())["error"] == "request_state_used"
    nothing_answered()
    assert McpRequestState.objects.count() == 1


def test_responses_to_questions_the_round_did_not_ask_are_refused(mcp_url):
    user = starter()
    token = token_for(user)
    elsewhere = ask(user=user, assignees=[f"user:{user.username}"])

    async def scenario() -> None:
        async with connect(mcp_url, token) as client:
            _question, state = form_round(await first_round(client))
            await client.session.call_tool(
                START,
                EXPENSE,
                input_responses={elsewhere.pk: accept(YES)},
                request_state=state,
                allow_input_required=True,
            )

    assert refused(scenario())["error"] == "invalid_input_responses"
    nothing_answered()
    assert not McpRequestState.objects.exists()


def test_an_accept_by_someone_who_may_no_longer_answer_is_refused(mcp_url):
    user = starter()
    token = token_for(user)

    async def lose_the_right(context: Any, params: Any) -> ElicitResult:
        from asgiref.sync import sync_to_async

        await sync_to_async(Interrupt.objects.update)(assignees=["user:somebody-else"])
        return ElicitResult(action="accept", content=YES)

    async def scenario() -> None:
        async with connect(mcp_url, token, elicitation_callback=lose_the_right) as client:
            await client.call_tool(START, EXPENSE)

    assert refused(scenario())["code"] == -32003
    nothing_answered()
    assert not McpRequestState.objects.exists()  # the state was not used up
