"""ASGI config for the hitl_site project."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

application = get_asgi_application()

from django.conf import settings  # noqa: E402  (configured by the call above)

if settings.DEBUG:  # the demo under uvicorn: static files served as runserver serves them
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)
