"""ASGI config for the hitl_site project: Django, with the agent protocols (DESIGN 4.5)
mounted beside it by path."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

django_application = get_asgi_application()  # sets Django up before the protocols import it

from workflows.protocols.mcp_server import mcp_application  # noqa: E402

# Path prefix -> ASGI app; every other path is Django's.
MOUNTS = [
    ("/mcp/", mcp_application()),
]


async def application(scope, receive, send):
    path = scope.get("path", "")
    for prefix, app in MOUNTS:
        if path.startswith(prefix) or path == prefix.rstrip("/"):
            return await app(scope, receive, send)
    return await django_application(scope, receive, send)
