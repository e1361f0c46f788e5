"""Serve ASGI apps beside Django by path prefix: the agent protocols' endpoints (`mcp/`)
next to the project's own views, in one ASGI application."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ASGIApp = Any


def mounted(default: ASGIApp, mounts: Sequence[tuple[str, ASGIApp]]) -> ASGIApp:
    """An ASGI app sending a request whose path starts with a mount's prefix ("/mcp/", or
    "/mcp" itself) to that mount's app, and every other one to `default` (Django's). The
    lifespan protocol is answered here: none of the mounted apps needs it."""

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope.get("path", "")
        for prefix, app in mounts:
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                await app(scope, receive, send)
                return
        await default(scope, receive, send)

    return application
