"""The tools (DESIGN 4.5): `start_<workflow>` for each registered workflow, and
`list_questions`, `answer_question`, `get_invocation`."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from ... import services
from ...engine.status import InterruptStatus
from ...inbox import INBOX_ORDER
from ...models import Interrupt
from ...policy import START_PERMISSION, answer_policy
from ...registry import registry
from ..envelope import envelope
from . import answers, render
from .auth import current_user
from .errors import refusal
from .forms import question_text
from .outcome import settle

START = "start_"
LIST_QUESTIONS = "list_questions"
ANSWER_QUESTION = "answer_question"
GET_INVOCATION = "get_invocation"
ANY_INPUT = {"type": "object", "description": "the workflow's input", "additionalProperties": True}

FIXED_TOOLS = [
    Tool(
        name=LIST_QUESTIONS,
        description="The open questions you may answer: the inbox, urgent first, then the "
        "soonest due, then the oldest (at most 100).",
        input_schema={"type": "object", "properties": {}},
    ),
    Tool(
        name=ANSWER_QUESTION,
        description="Answer a question by its id: your decision, under every rule it carries.",
        input_schema={
            "type": "object",
            "properties": {
                "question_id": {"type": "string"},
                "response": {"description": "the answer, valid against the question's schema"},
                "comment": {"type": "string"},
            },
            "required": ["question_id", "response"],
        },
    ),
    Tool(
        name=GET_INVOCATION,
        description="Where an invocation stands: status, output, open questions.",
        input_schema={
            "type": "object",
            "properties": {"invocation_id": {"type": "string"}},
            "required": ["invocation_id"],
        },
    ),
]


def workflow_tools() -> list[Tool]:
    tools = []
    for definition in registry.definitions():
        schema = getattr(definition.workflow, "input_schema", None) or ANY_INPUT
        tools.append(
            Tool(
                name=START + definition.name,
                description=f"Start the workflow {definition.name} (version {definition.version}); "
                "it may stop on questions for a person.",
                input_schema=schema,
            )
        )
    return tools


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    return ListToolsResult(tools=[*workflow_tools(), *FIXED_TOOLS])


def _start(workflow_name: str, node_input: Any, user: Any) -> str:
    close_old_connections()
    if not user.has_perm(START_PERMISSION):
        raise PermissionDenied(f"starting a workflow needs the permission {START_PERMISSION}")
    return str(services.start(workflow_name, node_input, user=user).pk)


def _questions(user: Any) -> list[dict[str, Any]]:
    close_old_connections()
    pending = answer_policy().answerable(
        user, Interrupt.objects.filter(status=InterruptStatus.PENDING)
    )
    rows = pending.select_related("invocation").prefetch_related("decisions").order_by(*INBOX_ORDER)
    return [envelope(interrupt, user) for interrupt in rows[:100]]


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult | dict[str, Any]:
    user = current_user()
    if params.request_state is not None or params.input_responses:
        return await _retried(ctx, user, params)
    name, arguments = params.name, params.arguments or {}
    if name.startswith(START) and name[len(START) :] in {d.name for d in registry.definitions()}:
        started = await sync_to_async(answers.refused_as_protocol_error)(
            _start, name[len(START) :], arguments, user
        )
        outcome = await settle(started, user)
        if render.wants_task(ctx):
            return {
                "resultType": "task",
                **render.task(outcome, full=False, forms=render.can_elicit(ctx)),
            }
        return render.tool_result(ctx, user, outcome)
    if name == LIST_QUESTIONS:
        questions = _json(await sync_to_async(_questions)(user))
        text = "\n\n".join(question_text(q) for q in questions) or "No open questions for you."
        return CallToolResult(
            content=[TextContent(text=text)], structured_content={"questions": questions}
        )
    if name == ANSWER_QUESTION:
        invocation_id = await sync_to_async(answers.answer_question)(
            str(arguments.get("question_id", "")),
            arguments.get("response"),
            str(arguments.get("comment") or ""),
            user,
        )
        return render.tool_result(ctx, user, await settle(invocation_id, user))
    if name == GET_INVOCATION:
        outcome = await settle(arguments.get("invocation_id"), user, wait=0)
        if not outcome.visible and not outcome.questions:
            raise refusal("unknown_invocation", "no such invocation of yours")
        return render.tool_result(ctx, user, outcome)
    raise refusal("unknown_tool", f"no tool {name!r}")


async def _retried(
    ctx: ServerRequestContext[Any, Any], user: Any, params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult:
    """The retry of an `input_required` round: its answers, then the next round."""
    if params.request_state is None:
        raise refusal("invalid_request_state", "inputResponses come with the round's requestState")
    invocation_id, left_open = await sync_to_async(answers.answer_round)(
        params.request_state, params.input_responses or {}, user
    )
    outcome = await settle(invocation_id, user)
    if left_open:
        # Cancelled: the question stays open; asking again at once would only loop.
        note = "Left open: " + ", ".join(left_open)
        return render.text_result(outcome, note=note)
    return render.tool_result(ctx, user, outcome)
