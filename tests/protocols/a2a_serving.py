"""The A2A agent over real HTTP for the tests: the site's ASGI application (Django with the
A2A app beside it) served by uvicorn on a free 127.0.0.1 port in a thread, and an
`a2a-sdk` client for a user's API token."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.utils.constants import TransportProtocol
from asgiref.sync import sync_to_async
from django.db import connections
from rest_framework.authtoken.models import Token


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
    from hitl_site.asgi import application

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
