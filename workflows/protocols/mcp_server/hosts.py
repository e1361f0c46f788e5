"""DNS rebinding protection by Django's own rule: a request's Host, and its Origin when it
has one, must be one of ALLOWED_HOSTS (as Django checks every request it serves)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send


def allowed_host(host: str | None) -> bool:
    domain, _port = split_domain_port(host or "")
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:  # Django's own default under DEBUG
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


class AllowedHostsMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if not allowed_host(headers.get("host")):
            refused = PlainTextResponse("Invalid Host header", status_code=421)
        elif origin is not None and not allowed_host(urlsplit(origin).netloc):
            refused = PlainTextResponse("Invalid Origin header", status_code=403)
        else:
            await self.app(scope, receive, send)
            return
        await refused(scope, receive, send)
