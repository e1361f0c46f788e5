"""The API's sign-in: a username and password exchanged for the caller's token."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from .schema import errors
from .throttling import TokenRateThrottle
from .views import ApiViewMixin

TokenSerializer = inline_serializer("Token", {"token": serializers.CharField()})


class ObtainTokenView(ApiViewMixin, ObtainAuthToken):
    """Exchange a username and password for the caller's API token (open to anonymous
    callers: it is how they sign in)."""

    required_permissions: list[type[BasePermission]] = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenRateThrottle]  # DRF's view has none: guesses would be unlimited

    @extend_schema(
        summary="Your API token, from your username and password",
        request=AuthTokenSerializer,
        responses={200: TokenSerializer, **errors(400, 413, 415, 429)},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().post(request, *args, **kwargs)
