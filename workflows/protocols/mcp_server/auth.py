"""Who calls: the API's tokens (`Authorization: Bearer <token>`), DRF's Token model as the
API reads it, checked by the `mcp` package's bearer middleware through this verifier."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from pydantic import PrivateAttr


class UserToken(AccessToken):
    """An API token and the active user it signs in (kept off the wire)."""

    _user: Any = PrivateAttr(default=None)

    @property
    def user(self) -> Any:
        return self._user


def token_user(key: str) -> Any:
    """The active user whose API token `key` is, else None."""
    from rest_framework.authtoken.models import Token  # the API's tokens (an optional app)

    close_old_connections()
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    return token.user


class ApiTokenVerifier:
    """The `mcp` package's TokenVerifier over the API's tokens."""

    async def verify_token(self, token: str) -> AccessToken | None:
        user = await sync_to_async(token_user)(token)
        if user is None:
            return None
        # client_id and subject name the user: the request-state binding and the
        # transport's session ownership both compare them.
        verified = UserToken(
            token=token, client_id=f"user:{user.pk}", scopes=[], subject=str(user.pk)
        )
        verified._user = user
        return verified


def current_user() -> Any:
    """The user of the request being served (the bearer middleware let only them in)."""
    token = get_access_token()
    if not isinstance(token, UserToken):
        raise PermissionError("no API token on this request")
    return token.user
