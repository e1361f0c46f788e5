"""ASGI config for the hitl_site project."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (configured by the call above)

from workflows.protocols.stream_asgi import stream_threads_shared  # noqa: E402

# The live streams hold no thread while they wait (docs/deployment.md, "ASGI").
application = stream_threads_shared(django_application)

if settings.DEBUG:  # the demo under uvicorn: static files served as runserver serves them
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)
