"""The A2A request handler: every call reads or writes the invocation itself (no task store
of its own), the Django ORM through asgiref's sync_to_async. Streams poll the store until
the task is final or needs the caller's input (a live stream would wake them sooner)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from asgiref.sync import sync_to_async
from django.db import close_old_connections

from workflows import services
from workflows.engine.errors import InvocationStateError
from workflows.models import Invocation
from workflows.policy import visible_invocations
from workflows.protocols.a2a_agent import messages, push
from workflows.protocols.a2a_agent.tasks import (
    OUTPUT_ARTIFACT,
    as_uuid_list,
    ends_stream,
    is_final,
    is_settled,
    read_task,
    task_of,
    visible_invocation,
    with_open_questions,
)
from workflows.transactions import write_transaction

R = TypeVar("R")

POLL_SECONDS = 0.25
MAX_POLL_SECONDS = 2.0
# How long a blocking SendMessage waits for the task to settle before answering WORKING.
BLOCKING_SECONDS = 30.0
LIST_PAGE_SIZE = 50
LIST_PAGE_MAX = 100

CALLER = "django_user"  # the ServerCallContext state key of the authenticated user


def caller(context: ServerCallContext) -> Any:
    return context.state[CALLER]


def _as_a_request(function: Callable[..., R], *args: Any) -> R:
    """`function` with the database connection handling of a Django request: a
    connection past CONN_MAX_AGE (or broken) is closed before and after."""
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()


async def in_thread(function: Callable[..., R], *args: Any) -> R:
    return await sync_to_async(_as_a_request, thread_sensitive=True)(function, *args)


def _send(message: a2a.Message, user: Any) -> str:
    if message.task_id:
        return str(messages.answer(message, user).pk)
    return str(messages.start(message, user).pk)


async def _send_configured(params: a2a.SendMessageRequest, user: Any) -> str:
    """Send the message; with a push notification config, store it for the task in the
    same transaction, so that it hears of the run the message causes (its URL checked
    before anything is sent)."""
    if not params.configuration.HasField("task_push_notification_config"):
        return await in_thread(_send, params.message, user)
    config = a2a.TaskPushNotificationConfig()
    config.CopyFrom(params.configuration.task_push_notification_config)
    await push.check_url(config.url)
    return await in_thread(_send_watched, params.message, config, user)


@write_transaction
def _send_watched(message: a2a.Message, config: a2a.TaskPushNotificationConfig, user: Any) -> str:
    config.task_id = _send(message, user)
    push.create(config, user)
    return config.task_id


def _read(task_id: str, user: Any) -> a2a.Task:
    with messages.refusals_named():
        return read_task(task_id, user)


def _cancel(task_id: str, user: Any) -> a2a.Task:
    with messages.refusals_named():
        invocation = visible_invocation(task_id, user)
        try:
            services.cancel(invocation, actor=user)
        except InvocationStateError:
            raise TaskNotCancelableError(f"task {task_id} is {invocation.status}") from None
    return _read(task_id, user)


def _list(params: a2a.ListTasksRequest, user: Any) -> a2a.ListTasksResponse:
    invocations = visible_invocations(user, Invocation.objects.all()).order_by("-created_at", "pk")
    if params.context_id:
        invocations = invocations.filter(session_id__in=as_uuid_list(params.context_id))
    size = min(params.page_size or LIST_PAGE_SIZE, LIST_PAGE_MAX)
    start = int(params.page_token) if params.page_token.isdigit() else 0
    total = invocations.count()
    page = [task_of(i, user) for i in with_open_questions(invocations)[start : start + size]]
    if params.status:
        page = [task for task in page if task.status.state == params.status]
    following = start + size
    return a2a.ListTasksResponse(
        tasks=page,
        next_page_token=str(following) if following < total else "",
        page_size=size,
        total_size=total,
    )


class InvocationRequestHandler(RequestHandler):
    """A2A's operations on the project's invocations, for the authenticated caller."""

    async def on_get_task(self, params: a2a.GetTaskRequest, context: ServerCallContext) -> a2a.Task:
        return await in_thread(_read, params.id, caller(context))

    async def on_list_tasks(
        self, params: a2a.ListTasksRequest, context: ServerCallContext
    ) -> a2a.ListTasksResponse:
        return await in_thread(_list, params, caller(context))

    async def on_cancel_task(
        self, params: a2a.CancelTaskRequest, context: ServerCallContext
    ) -> a2a.Task:
        return await in_thread(_cancel, params.id, caller(context))

    async def on_message_send(
        self, params: a2a.SendMessageRequest, context: ServerCallContext
    ) -> a2a.Task:
        user = caller(context)
        task_id = await _send_configured(params, user)
        task = await in_thread(_read, task_id, user)
        if params.configuration.return_immediately:
            return task
        deadline = time.monotonic() + BLOCKING_SECONDS
        while not is_settled(task) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            task = await in_thread(_read, task_id, user)
        return task

    async def on_message_send_stream(
        self, params: a2a.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        user = caller(context)
        task_id = await _send_configured(params, user)
        async for event in _follow(task_id, user):
            yield event

    async def on_subscribe_to_task(
        self, params: a2a.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        user = caller(context)
        task = await in_thread(_read, params.id, user)
        if is_final(task):
            raise UnsupportedOperationError(f"task {params.id} is over: nothing more to stream")
        async for event in _follow(params.id, user):
            yield event

    async def on_create_task_push_notification_config(
        self, params: a2a.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        await push.check_url(params.url)
        return await in_thread(push.create, params, caller(context))

    async def on_get_task_push_notification_config(
        self, params: a2a.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        return await in_thread(push.get, params, caller(context))

    async def on_list_task_push_notification_configs(
        self, params: a2a.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a.ListTaskPushNotificationConfigsResponse:
        return await in_thread(push.listed, params, caller(context))

    async def on_delete_task_push_notification_config(
        self, params: a2a.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await in_thread(push.delete, params, caller(context))

    async def on_get_extended_agent_card(
        self, params: a2a.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a.AgentCard:
        raise ExtendedAgentCardNotConfiguredError


async def _follow(task_id: str, user: Any) -> AsyncGenerator[Event]:
    """The task, then a status update each time it changes (the output as an artifact
    before the last), until it is final or needs the caller's input. The poll slows down
    to MAX_POLL_SECONDS while nothing changes (a question may wait for days)."""
    task = await in_thread(_read, task_id, user)
    yield task
    seen, pause = task.status, POLL_SECONDS
    while not ends_stream(task):
        await asyncio.sleep(pause)
        task = await in_thread(_read, task_id, user)
        if task.status.state == seen.state and task.status.message == seen.message:
            pause = min(pause * 2, MAX_POLL_SECONDS)
            continue
        seen, pause = task.status, POLL_SECONDS
        for artifact in task.artifacts:
            if artifact.artifact_id == OUTPUT_ARTIFACT:
                yield a2a.TaskArtifactUpdateEvent(
                    task_id=task.id, context_id=task.context_id, artifact=artifact, last_chunk=True
                )
        yield a2a.TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status
        )
