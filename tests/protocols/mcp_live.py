"""The MCP server over real HTTP for the tests: uvicorn serving Django and the MCP app on a
free 127.0.0.1 port in a thread, API tokens, the `mcp` SDK's own client, and a workflow
that asks two questions in a row."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import uvicorn
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.db import connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from rest_framework.authtoken.models import Token

from tests.factories import ApproverFactory
from workflows.engine import RequestInput, Workflow, node
from workflows.registry import registry

WORKFLOW = "hitl_test_mcp_expense"
APPROVAL = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve the expense?"},
        "comment": {"type": "string"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
PAYOUT = {
    "type": "object",
    "properties": {
        "method": {"type": "string", "enum": ["bank", "card"]},
        "amount": {"type": "integer", "minimum": 1},
    },
    "required": ["method", "amount"],
}


@node(name="approval")
def approval(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Approve {node_input['amount']} EUR for {node_input['what']}?",
        response_schema=APPROVAL,
        four_eyes=bool(node_input.get("four_eyes")),
    )


@node(name="payout")
def payout(node_input: dict) -> Any:
    if not node_input.get("approved"):
        return {"rejected": node_input}
    return RequestInput(message="How is it paid out?", response_schema=PAYOUT)


@node
def paid(node_input: Any) -> Any:
    return {"paid": node_input}


if WORKFLOW not in {d.name for d in registry.definitions()}:
    registry.register(Workflow(name=WORKFLOW, edges=[("START", approval, payout, paid)]))


def asgi_application() -> Any:
    """Django with the MCP server mounted at /mcp/, as a project's asgi.py mounts it."""
    from django.core.asgi import get_asgi_application

    from workflows.protocols.mcp_server import mcp_application
    from workflows.protocols.mounts import mounted

    return mounted(get_asgi_application(), [("/mcp/", mcp_application())])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(name="mcp_url")
def live_mcp_url(transactional_db: Any) -> Iterator[str]:
    """The MCP endpoint, mounted beside Django and served by uvicorn for this test."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            asgi_application(), host="127.0.0.1", port=port, lifespan="off", log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.01)
    yield f"http://127.0.0.1:{port}/mcp/"
    server.should_exit = True
    thread.join(timeout=10)
    # The server's ORM calls ran in asgiref's one sync thread: close its connection there,
    # or the test database cannot be dropped.
    asyncio.run(sync_to_async(connections.close_all)())


def token_for(user: Any) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def starter(username: str = "sam") -> Any:
    """A user who may start workflows and answer questions."""
    user = ApproverFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_invocation"))
    return type(user).objects.get(pk=user.pk)  # permissions are cached per object


async def unanswered(context: Any, params: Any) -> Any:
    raise AssertionError("this test answers its rounds itself")


@asynccontextmanager
async def connect(url: str, token: str, mode: str = "2026-07-28", **options: Any) -> Any:
    """The `mcp` SDK's client, signed in with an API token; it shows elicitation forms
    (declares the capability) unless `elicitation_callback=None`."""
    options.setdefault("elicitation_callback", unanswered)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def form_round(result: Any) -> tuple[str, str]:
    """The one question an `input_required` result asks, and its requestState."""
    (question_id,) = result.input_requests
    return question_id, result.request_state


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def refused(call: Any) -> dict[str, Any]:
    """The JSON-RPC error a call ends with: its code and data (error, detail)."""
    try:
        run(call)
    except BaseException as exc:  # the client's task group wraps it in a group
        error = mcp_error(exc)
        return {"code": error.error.code, **(error.error.data or {})}
    raise AssertionError("the call was not refused")


def mcp_error(exc: BaseException) -> MCPError:
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            return mcp_error(inner)
    raise exc
