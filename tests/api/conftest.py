"""Fixtures of the API tests: workflows of their own, users with exactly the permissions a
test names, token-authenticated clients, and a snapshot of every table a request could
change (to prove that a rejected request changed nothing)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.core import serializers
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory
from workflows import services
from workflows.engine import JoinNode, RequestInput, Workflow, node
from workflows.models import (
    Decision,
    Delegation,
    IdempotencyKey,
    Interrupt,
    Invocation,
    NodeRun,
    Session,
    SessionEvent,
    WebhookDelivery,
)
from workflows.registry import registry

DECISION_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "comment": {"type": "string"}},
    "required": ["approved"],
    "additionalProperties": False,
}
FLAKY = {"fail": False}


@node(name="approval")
def ask_approval(node_input: dict) -> RequestInput:
    return RequestInput(
        message="Approve?",
        payload={"amount": node_input.get("amount", 0)},
        response_schema=DECISION_SCHEMA,
        assignees=node_input.get("assignees", []),
        four_eyes=node_input.get("four_eyes", False),
    )


@node
def outcome(node_input: dict) -> dict:
    return {"approved": node_input["approved"]}


def reviewer(side: str) -> Any:
    @node(name=f"{side}_review")
    def review(node_input: Any) -> RequestInput:
        return RequestInput(message=f"{side} review", response_schema=DECISION_SCHEMA)

    return review


@node
def summary(node_input: dict) -> dict:
    return {"approved": all(answer["approved"] for answer in node_input.values())}


@node
def flaky(node_input: Any) -> dict:
    if FLAKY["fail"]:
        raise RuntimeError("flaky node failed")
    return {"ok": True}


@pytest.fixture(autouse=True)
def api_workflows() -> Iterator[None]:
    """`api_approval` (one question, assignees and four-eyes from the input), `api_pair`
    (two questions at once, joined) and `api_flaky` (fails while FLAKY["fail"])."""
    join = JoinNode(name="both")
    registry.register(Workflow(name="api_approval", edges=[("START", ask_approval, outcome)]))
    registry.register(
        Workflow(
            name="api_pair",
            edges=[
                ("START", reviewer("left"), join),
                ("START", reviewer("right"), join),
                (join, summary),
            ],
        )
    )
    registry.register(Workflow(name="api_flaky", edges=[("START", flaky)]))
    FLAKY["fail"] = False
    cache.clear()  # throttling counts live in the cache
    yield
    for name in ("api_approval", "api_pair", "api_flaky"):
        registry.unregister(name)


def user_with(*permissions: str, groups: tuple[str, ...] = (), **fields: Any) -> Any:
    """A user holding exactly these model permissions ("workflows.add_invocation")."""
    user = UserFactory(**fields)
    for dotted in permissions:
        app_label, codename = dotted.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def client_for() -> Callable[[Any], APIClient]:
    """An APIClient authenticated with the user's token."""

    def make(user: Any) -> APIClient:
        client = APIClient()
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make


@pytest.fixture
def operator() -> Any:
    """May start invocations and answer interrupts."""
    return user_with("workflows.add_invocation", "workflows.answer_interrupt")


@pytest.fixture
def api(client_for: Callable[[Any], APIClient], operator: Any) -> APIClient:
    return client_for(operator)


def start(workflow: str = "api_approval", node_input: Any = None, user: Any = None) -> Any:
    """An invocation started through the service (tasks run in-process on commit)."""
    invocation = services.start(workflow, node_input or {}, user=user)
    invocation.refresh_from_db()
    return invocation


def pending(invocation: Any) -> list[Interrupt]:
    return list(Interrupt.objects.filter(invocation=invocation, status="pending").order_by("path"))


def snapshot() -> str:
    """Every row a request could change."""
    rows = [
        *Session.objects.all(),
        *Invocation.objects.all(),
        *NodeRun.objects.all(),
        *SessionEvent.objects.all(),
        *Interrupt.objects.all(),
        *Decision.objects.all(),
        *Delegation.objects.all(),
        *IdempotencyKey.objects.all(),
        *WebhookDelivery.objects.all(),
    ]
    return serializers.serialize("json", rows)


def error_of(response: Any) -> tuple[int, str, str | None]:
    """(status, error code, field) of an error response, checking its shape."""
    body = response.json()
    assert set(body) >= {"error", "detail", "field"}, body
    assert isinstance(body["detail"], str) and body["detail"], body
    return response.status_code, body["error"], body["field"]
