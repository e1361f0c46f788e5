"""Throttles of the API views that DRF's per-project defaults do not cover."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from ..conf import hitl_settings


class TokenRateThrottle(SimpleRateThrottle):
    """Bounds password guessing at the token endpoint: HITL["TOKEN_THROTTLE_RATE"] requests
    per client address (DRF's `get_ident`: REMOTE_ADDR, or X-Forwarded-For as far as
    REST_FRAMEWORK["NUM_PROXIES"] trusts it), whatever the project's DRF throttles say."""

    scope = "hitl_token"

    def get_rate(self) -> str:
        return hitl_settings.TOKEN_THROTTLE_RATE

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
