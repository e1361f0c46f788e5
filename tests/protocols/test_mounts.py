"""Apps mounted beside Django by path prefix (the agent protocols' endpoints)."""

import asyncio
from typing import Any

from workflows.protocols.mounts import mounted


def recorder(name: str, calls: list[tuple[str, str]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append((name, scope["path"]))

    return app


def test_a_prefix_goes_to_its_app_and_every_other_path_to_django():
    calls: list[tuple[str, str]] = []
    app = mounted(recorder("django", calls), [("/mcp/", recorder("mcp", calls))])

    for path in ("/mcp/", "/mcp", "/mcpx/", "/admin/", "/api/mcp/"):
        asyncio.run(app({"type": "http", "path": path}, None, None))

    assert calls == [
        ("mcp", "/mcp/"),
        ("mcp", "/mcp"),
        ("django", "/mcpx/"),
        ("django", "/admin/"),
        ("django", "/api/mcp/"),
    ]


def test_the_lifespan_is_answered_without_the_apps():
    app = mounted(recorder("django", []), [])
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, str]] = []

    async def receive() -> dict[str, str]:
        return incoming.pop(0)

    async def send(message: dict[str, str]) -> None:
        sent.append(message)

    asyncio.run(app({"type": "lifespan"}, receive, send))

    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
