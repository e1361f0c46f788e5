"""ASGI config for the hitl_site project: Django, with the agent protocols (DESIGN 4.5)
mounted beside it by path."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

django_application = get_asgi_application()  # sets Django up before the protocols import it

from django.conf import settings  # noqa: E402

if settings.DEBUG:  # the demo's static files, as runserver serves them
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

from workflows.protocols.mcp_server import mcp_application  # noqa: E402

# Path prefix -> ASGI app; every other path is Django's.
MOUNTS = [
    ("/mcp/", mcp_application()),
]


async def application(scope, receive, send):
    if scope["type"] == "lifespan":  # nothing to start: the MCP app starts on its first request
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        return await send({"type": "lifespan.shutdown.complete"})
    path = scope.get("path", "")
    for prefix, app in MOUNTS:
        if path.startswith(prefix) or path == prefix.rstrip("/"):
            return await app(scope, receive, send)
    return await django_application(scope, receive, send)
