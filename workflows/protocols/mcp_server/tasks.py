"""The Tasks extension (`io.modelcontextprotocol/tasks`): a started workflow is a task whose
id is the invocation's, `input_required` for as long as a question the caller may answer
waits (days, if it must); `tasks/get` reads it, `tasks/update` answers it, `tasks/cancel`
cancels the invocation through `services.cancel`."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp_types import InputResponseRequestParams, RequestParams
from pydantic import Field

from ... import services
from . import answers, render
from .auth import current_user
from .errors import refusal
from .outcome import Outcome, read_outcome, settle


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateTaskParams(InputResponseRequestParams):
    task_id: str = Field(alias="taskId")


async def _visible(task_id: str, user: Any) -> Outcome:
    """The task's invocation, when the caller may see it or answer one of its questions;
    else the same error as for no task at all."""
    try:
        outcome = await sync_to_async(read_outcome)(task_id, user)
    except Exception:
        outcome = None
    if outcome is None or (not outcome.visible and not outcome.questions):
        raise refusal("unknown_task", f"no task {task_id} of yours")
    return outcome


async def get_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    outcome = await _visible(params.task_id, current_user())
    return render.task(outcome, full=True, forms=render.can_elicit(ctx))


async def update_task(
    ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
) -> dict[str, Any]:
    user = current_user()
    await _visible(params.task_id, user)
    await sync_to_async(answers.update_task)(params.task_id, params.input_responses or {}, user)
    return {}


def _cancel(task_id: str, user: Any) -> None:
    close_old_connections()
    answers.refused_as_protocol_error(services.cancel, task_id, actor=user)


async def cancel_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    user = current_user()
    await _visible(params.task_id, user)
    await sync_to_async(_cancel)(params.task_id, user)
    outcome = await settle(params.task_id, user, wait=0)
    return render.task(outcome, full=True, forms=render.can_elicit(ctx))


def install(server: Server[Any]) -> None:
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/update", UpdateTaskParams, update_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    server.extensions[render.TASKS_EXTENSION] = {}
