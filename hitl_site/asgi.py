"""ASGI config for the hitl_site project: Django (its static files too when DEBUG, as
runserver serves them), with the agent protocols mounted beside it by path."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

django_application = get_asgi_application()  # sets Django up before the protocols import it

from django.conf import settings  # noqa: E402

from workflows.protocols.a2a_agent.app import a2a_application  # noqa: E402
from workflows.protocols.a2a_agent.card import CARD_PATH  # noqa: E402
from workflows.protocols.mcp_server import mcp_application  # noqa: E402
from workflows.protocols.mounts import mounted  # noqa: E402
from workflows.protocols.stream_asgi import stream_threads_shared  # noqa: E402

# The live streams hold no thread while they wait (docs/deployment.md, "ASGI").
django_application = stream_threads_shared(django_application)

if settings.DEBUG:  # the demo's static files, as runserver serves them
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

_a2a = a2a_application()

# Path prefix -> ASGI app; every other path is Django's.
MOUNTS = [
    ("/mcp/", mcp_application()),
    ("/a2a/", _a2a),
    (CARD_PATH, _a2a),
]

application = mounted(django_application, MOUNTS)
