"""The A2A ASGI application: the Agent Card (public), JSON-RPC at `a2a/` and HTTP+JSON
under `a2a/`, both behind the API's tokens (`Authorization: Bearer <token>`). A request
without a valid token is a 401 before any A2A method runs."""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from workflows.protocols.a2a_agent.card import CARD_PATH, JSONRPC_PATH, REST_PATH, agent_card
from workflows.protocols.a2a_agent.handler import CALLER, InvocationRequestHandler, in_thread

SCOPE_USER = "hitl_user"


def _user_for(authorization: str) -> Any:
    """The active user whose API token the header carries, else None."""
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    try:
        user, _token = TokenAuthentication().authenticate_credentials(key.strip())
    except AuthenticationFailed:
        return None
    return user


class TokenRequired:
    """Every path but the Agent Card needs the API's token: 401 with a Bearer challenge."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == CARD_PATH:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        user = await in_thread(_user_for, authorization)
        if user is None:
            refused = JSONResponse(
                {"error": "not_authenticated", "detail": "send Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="a2a"'},
            )
            await refused(scope, receive, send)
            return
        scope[SCOPE_USER] = user
        await self.app(scope, receive, send)


class CallerContextBuilder(DefaultServerCallContextBuilder):
    """The A2A call context, holding the Django user the token named."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[CALLER] = request.scope[SCOPE_USER]
        return context


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def _card(request: Request) -> Response:
    card = await in_thread(agent_card, _base_url(request))
    return JSONResponse(agent_card_to_dict(card))


def a2a_application() -> ASGIApp:
    """The ASGI app serving `/.well-known/agent-card.json` and everything under `/a2a`."""
    handler = InvocationRequestHandler()
    context_builder = CallerContextBuilder()
    routes = [
        Route(CARD_PATH, _card, methods=["GET"]),
        *create_jsonrpc_routes(
            handler, JSONRPC_PATH, context_builder=context_builder, enable_v0_3_compat=True
        ),
        *create_rest_routes(
            handler, context_builder=context_builder, path_prefix=REST_PATH, enable_v0_3_compat=True
        ),
    ]
    return TokenRequired(Starlette(routes=routes))
