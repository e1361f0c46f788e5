"""MCP (protocol 2026-07-28, Streamable HTTP) at `mcp/` (DESIGN 4.5): `mcp_application()` is
the ASGI app a project mounts; hitl_site/asgi.py shows how."""

from .app import mcp_application

__all__ = ["mcp_application"]
