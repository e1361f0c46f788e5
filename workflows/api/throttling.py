"""Throttles of the API views that DRF's per-project defaults do not cover."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from ..conf import hitl_settings


class TokenRateThrottle(SimpleRateThrottle):
    """Bounds password guessing at the token endpoint: HITL["TOKEN_THROTTLE_RATE"] requests
    per client address, whatever the project's DRF throttles say."""

    scope = "hitl_token"

    def get_rate(self) -> str:
        return hitl_settings.TOKEN_THROTTLE_RATE

    def get_ident(self, request: Request) -> str:
        """The client address: REMOTE_ADDR, or the address REST_FRAMEWORK["NUM_PROXIES"]
        trusted proxies put in X-Forwarded-For. Unset, DRF would take the header whole,
        which every client writes as it likes (a new address per guess); here it is 0."""
        if api_settings.NUM_PROXIES is None:
            return str(request.META.get("REMOTE_ADDR"))
        return super().get_ident(request)

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
