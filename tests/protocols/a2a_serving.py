"""The A2A agent over real HTTP for the tests: the site's ASGI application (Django with the
A2A app beside it) served by uvicorn on a free 127.0.0.1 port in a thread, an `a2a-sdk`
client for a user's API token, and the messages that start and answer the asking
workflow (tests.asking)."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import TransportProtocol
from asgiref.sync import sync_to_async
from django.db import connections
from google.protobuf.json_format import MessageToDict
from rest_framework.authtoken.models import Token

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from workflows.protocols.a2a_agent.tasks import data_part

FUNCTION_RESPONSE = {"adk_type": "function_response"}


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens (no polling for the port)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()

    def install_signal_handlers(self) -> None:  # the test runner keeps its own
        pass


@pytest.fixture(name="a2a_site")
def serve_a2a_site() -> Iterator[str]:
    """The base URL of the site, served for the test's duration."""
    from django.core.asgi import get_asgi_application

    from workflows.protocols.a2a_agent.app import a2a_application
    from workflows.protocols.a2a_agent.card import CARD_PATH
    from workflows.protocols.mounts import mounted

    a2a = a2a_application()
    application = mounted(get_asgi_application(), [("/a2a/", a2a), (CARD_PATH, a2a)])

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(application, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert server.listening.wait(30), "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)
    sock.close()
    # The app's database work ran in asgiref's one thread for thread-sensitive calls: its
    # connection closes there, so that the test database can be dropped.
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def token_of(user: Any) -> str:
    return Token.objects.get_or_create(user=user)[0].key


async def a2a_client(
    base_url: str, token: str | None, *, binding: str = "JSONRPC", streaming: bool = False
) -> Client:
    """The SDK's client, resolving the Agent Card at `base_url` and speaking `binding`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    config = ClientConfig(
        streaming=streaming,
        httpx_client=httpx.AsyncClient(headers=headers, timeout=60),
        supported_protocol_bindings=[TransportProtocol(binding).value],
    )
    return await create_client(base_url, client_config=config)


def starter(username: str = "sam") -> Any:
    """A user who may start workflows and answer the questions assigned to them."""
    user = grant_answer(ApproverFactory(username=username), "add_invocation")
    return user


def start_message(request: dict[str, Any], **ids: str) -> a2a.Message:
    request = {"message": "Approve?", "response_schema": APPROVAL, **request}
    return a2a.Message(
        message_id=str(uuid.uuid4()),
        role=a2a.ROLE_USER,
        parts=[data_part({"workflow": WORKFLOW, "input": {"request": request}})],
        **ids,
    )


def answer_message(task: a2a.Task, call_id: str, response: Any, **ids: str) -> a2a.Message:
    ids = {"task_id": task.id, "context_id": task.context_id, **ids}
    part = data_part({"id": call_id, "name": "question", "response": response}, FUNCTION_RESPONSE)
    return a2a.Message(message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=[part], **ids)


async def send(base_url: str, token: str, message: a2a.Message, **options: Any) -> a2a.Task:
    client = await a2a_client(base_url, token, **options)
    last = None
    async for event in client.send_message(a2a.SendMessageRequest(message=message)):
        last = event
    await client.close()
    assert last is not None and last.HasField("task")
    return last.task


def function_calls(task: a2a.Task) -> list[dict[str, Any]]:
    return [
        {"data": MessageToDict(p.data), "metadata": MessageToDict(p.metadata)}
        for p in task.status.message.parts
        if p.HasField("data")
    ]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)
