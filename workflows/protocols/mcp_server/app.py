"""The MCP server at `mcp/`: Streamable HTTP on the `mcp` package's lowlevel Server, behind
its bearer middleware over the API's tokens, an ASGI app mounted beside Django."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import Receive, Scope, Send

from . import state, tasks, tools
from .auth import ApiTokenVerifier
from .hosts import AllowedHostsMiddleware

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
        # A task (the Tasks extension) is a result the Server's signature does not name.
        on_call_tool=cast(Any, tools.call_tool),
    )
    server.middleware.append(state.boundary())
    tasks.install(server)
    return server


class McpApplication:
    """The ASGI app. Its session manager runs in a task of its own, started by the first
    request on an event loop, so it needs no lifespan support from the server (or the
    router) it runs in; a new event loop (a restarted server) gets a new one."""

    def __init__(self) -> None:
        self.server = build_server()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: asyncio.Future[None] | None = None
        self._app: Any = None

    def _stack(self) -> tuple[StreamableHTTPSessionManager, Any]:
        # Stateless: every request stands alone (2026-07-28 needs no session; a 2025-11-25
        # client gets no session id and needs none); plain JSON answers, no SSE.
        manager = StreamableHTTPSessionManager(app=self.server, json_response=True, stateless=True)
        transport = RequireAuthMiddleware(StreamableHTTPASGIApp(manager), required_scopes=[])
        app = AuthenticationMiddleware(
            AuthContextMiddleware(transport), backend=BearerAuthBackend(ApiTokenVerifier())
        )
        return manager, AllowedHostsMiddleware(app)

    async def _run(
        self, manager: StreamableHTTPSessionManager, running: asyncio.Future[None]
    ) -> None:
        async with manager.run():
            running.set_result(None)
            await asyncio.Event().wait()  # as long as the event loop runs

    async def _started(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._running is None:
            manager, self._app = self._stack()
            self._loop, self._running = loop, loop.create_future()
            self._task = loop.create_task(self._run(manager, self._running))
        await asyncio.shield(self._running)
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets; lifespan is not needed (see the class)
        app = await self._started()
        await app(scope, receive, send)


def mcp_application() -> McpApplication:
    return McpApplication()
