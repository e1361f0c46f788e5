"""The test project's ASGI application, wrapped as docs/deployment.md tells a host to wrap
theirs (the protocol tests serve it with uvicorn: tests/protocols/server.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")
django_application = get_asgi_application()  # sets Django up: the app's modules import after

from workflows.protocols.stream_asgi import stream_threads_shared  # noqa: E402

application = stream_threads_shared(django_application)
