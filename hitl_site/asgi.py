"""ASGI config for the hitl_site project: Django (its static files too when DEBUG, as
runserver serves them), with the A2A agent beside it (its Agent Card and `a2a/`) when
`a2a-sdk` is installed."""

import os
from importlib.util import find_spec

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

application = get_asgi_application()
if settings.DEBUG:
    application = ASGIStaticFilesHandler(application)

if find_spec("a2a") is not None and find_spec("starlette") is not None:
    from workflows.protocols.a2a_agent.app import a2a_application, serves

    django_application, a2a_app = application, a2a_application()

    async def application(scope, receive, send):  # type: ignore[no-redef]
        """The A2A paths to the A2A app, every other request to Django."""
        if scope["type"] == "http" and serves(scope["path"]):
            return await a2a_app(scope, receive, send)
        return await django_application(scope, receive, send)
