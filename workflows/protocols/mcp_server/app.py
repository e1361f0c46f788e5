"""The MCP server at `mcp/`: Streamable HTTP on the `mcp` package's lowlevel Server, behind
its bearer middleware over the API's tokens, an ASGI app mounted beside Django."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import Receive, Scope, Send

from . import state, tasks, tools
from .auth import ApiTokenVerifier

NAME = "hitl-workflows"


def build_server() -> Server[Any]:
    server: Server[Any] = Server(
        NAME,
        version="1",
        instructions=(
            "Start workflows that may stop on questions for a person; answer the questions "
            "you may answer (elicitation forms), or follow a question's decision page."
        ),
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
    server.middleware.append(state.boundary())
    tasks.install(server)
    return server


class McpApplication:
    """The ASGI app. Its session manager runs in a task of its own, started by the first
    request, so it needs no lifespan support from the server (or the router) it runs in."""

    def __init__(self) -> None:
        self.server = build_server()
        # Stateless: every request stands alone (2026-07-28 needs no session; a 2025-11-25
        # client gets no session id and needs none); plain JSON answers, no SSE.
        self.manager = StreamableHTTPSessionManager(app=self.server, json_response=True, stateless=True)
        transport = RequireAuthMiddleware(StreamableHTTPASGIApp(self.manager), required_scopes=[])
        self.app = AuthenticationMiddleware(
            AuthContextMiddleware(transport), backend=BearerAuthBackend(ApiTokenVerifier())
        )
        self._running: asyncio.Future[None] | None = None
        self._manager_task: asyncio.Task[None] | None = None

    async def _run_manager(self, running: asyncio.Future[None]) -> None:
        async with self.manager.run():
            running.set_result(None)
            await asyncio.Event().wait()  # until the event loop ends

    async def _started(self) -> None:
        if self._running is None:
            self._running = asyncio.get_running_loop().create_future()
            self._manager_task = asyncio.create_task(self._run_manager(self._running))
        await asyncio.shield(self._running)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets; lifespan is not needed (see the class)
        await self._started()
        await self.app(scope, receive, send)


def mcp_application() -> McpApplication:
    return McpApplication()
