"""Serving the live streams under ASGI without a thread per client.

Django's ASGI handler runs each request inside a ThreadSensitiveContext, whose thread
(where the request's synchronous middleware runs) lives until the response ends: one
parked thread per open stream (measured: 1,000 streams, 1,007 threads). `stream_threads_shared`
lets the stream requests skip that context: their synchronous middleware then runs in
asgiref's one shared thread, and their view in the shared pool (`pooled_view`), so an open
stream holds no thread at all while it waits.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

# The paths of the streaming endpoints, wherever the host mounts the API.
STREAM_PATHS = re.compile(r"/(invocations/[^/]+/stream|agui/[^/]+)/$")

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]


def stream_threads_shared(handler: ASGIHandler) -> ASGIApp:
    """`handler`, with the stream requests served outside a per-request thread."""

    async def application(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and STREAM_PATHS.search(scope["path"]):
            await handler.handle(scope, receive, send)
        else:
            await handler(scope, receive, send)

    return application


def pooled_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """A synchronous view (a DRF one) as an async view that runs it in the shared thread
    pool: under ASGI no thread is set aside for the request; under WSGI Django runs it
    to completion as any async view."""

    @wraps(view)
    async def pooled(request: Any, *args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(view, thread_sensitive=False)(request, *args, **kwargs)

    return pooled
