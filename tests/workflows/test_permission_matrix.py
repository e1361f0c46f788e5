"""The permission matrix: every state-changing operation, tried by each kind of caller
through each way in (the services, the API, the admin). What is expected is read from
TABLE below, never from the code under test.

The scene: a four-eyes question for group:reviewers, asked by an invocation `starter`
started; `starter` and `assignee` are reviewers with the answer permission. Releasing
finds the question claimed by `assignee`; retrying finds the invocation FAILED; rotating
is of a webhook endpoint's secret.

Allowed ("yes"): the change happens (the API answers 2xx). Refused ("-"): nothing changes
at all (the services raise PermissionDenied, the API answers 401 or 403, the admin refuses
or reports it).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import AnonymousUser, Group
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.asking import WORKFLOW, ask
from tests.factories import UserFactory, grant_answer
from workflows import services, webhooks
from workflows.admin.display import decision_url
from workflows.models import (
    Decision,
    Interrupt,
    Invocation,
    NodeRun,
    SessionEvent,
    WebhookEndpoint,
)

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = """
principal                    answer  decide  claim  release  reassign  cancel  retry  rotate
anonymous                    -       -       -      -        -         -       -      -
inactive                     -       -       -      -        -         -       -      -
no_permissions               -       -       -      -        -         -       -      -
non_assignee                 -       -       -      -        -         -       -      -
reassign_interrupt           -       -       -      yes      yes       -       -      -
cancel_invocation            -       -       -      -        -         yes     -      -
retry_invocation             -       -       -      -        -         -       yes    -
change_webhookendpoint       -       -       -      -        -         -       -      yes
all_permissions              -       -       -      yes      yes       yes     yes    yes
starter                      -       -       -      -        -         yes     yes    -
assignee                     yes     yes     yes    yes      yes       -       -      -
assignee_without_permission  -       -       -      -        -         -       -      -
superuser                    -       -       -      yes      yes       yes     yes    yes
"""

RELEVANT = (
    "answer_interrupt",
    "reassign_interrupt",
    "cancel_invocation",
    "retry_invocation",
    "change_webhookendpoint",
)
# Who each principal is: (their workflows permissions, a reviewer?, other user fields).
PRINCIPALS: dict[str, tuple[tuple[str, ...], bool, dict[str, Any]] | None] = {
    "anonymous": None,
    "inactive": (RELEVANT, True, {"is_active": False}),
    "no_permissions": ((), False, {}),
    "non_assignee": (("answer_interrupt",), False, {}),
    "reassign_interrupt": (("reassign_interrupt",), False, {}),
    "cancel_invocation": (("cancel_invocation",), False, {}),
    "retry_invocation": (("retry_invocation",), False, {}),
    "change_webhookendpoint": (("change_webhookendpoint",), False, {}),
    "all_permissions": (RELEVANT, False, {}),
    "starter": (("answer_interrupt",), True, {}),
    "assignee": (("answer_interrupt",), True, {}),
    "assignee_without_permission": ((), True, {}),
    "superuser": ((), False, {"is_superuser": True}),
}
# The ways in that offer each operation (the API reassigns nothing; the admin answers by
# decisions only).
CHANNELS = {
    "answer": ("services", "api"),
    "decide": ("services", "api", "admin"),
    "claim": ("services", "api", "admin"),
    "release": ("services", "api", "admin"),
    "reassign": ("services", "admin"),
    "cancel": ("services", "api", "admin"),
    "retry": ("services", "api", "admin"),
    "rotate": ("services", "admin"),
}


def expected_table() -> dict[tuple[str, str], bool]:
    header, *rows = TABLE.strip().splitlines()
    operations = header.split()[1:]
    expected = {}
    for row in rows:
        principal, *cells = row.split()
        for operation, cell in zip(operations, cells, strict=True):
            expected[principal, operation] = cell == "yes"
    return expected


EXPECTED = expected_table()
YES = {"approved": True}
TARGET = ["user:assignee"]


def person(name: str) -> Any:
    """The principal `name`, created as PRINCIPALS says (every one of them is staff)."""
    if PRINCIPALS[name] is None:
        return AnonymousUser()
    permissions, reviewer, fields = PRINCIPALS[name]
    user = UserFactory(username=name, is_staff=True, **fields)
    if reviewer:
        user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    return grant_answer(user, *permissions) if permissions else user


def scene(operation: str) -> tuple[Any, Interrupt | None, dict[str, Any]]:
    """The invocation (the endpoint, for a rotation), its question (None for a retry and a
    rotation) and the people in the scene."""
    people = {"starter": person("starter"), "assignee": person("assignee")}
    if operation == "rotate":  # inactive: nothing is sent to it
        endpoint = WebhookEndpoint.objects.create(url="https://hooks.example/", is_active=False)
        endpoint.first_secret = endpoint.secret  # the service sets .secret on this object
        return endpoint, None, people
    if operation == "retry":  # the question is badly made: the asking node fails
        invocation = services.start(WORKFLOW, {"request": {"quorum": 0}}, user=people["starter"])
        return invocation, None, people
    question = ask(user=people["starter"], assignees=["group:reviewers"], four_eyes=True)
    if operation == "release":
        services.claim(question.pk, actor=people["assignee"])
    return question.invocation, question, people


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *NodeRun.objects.all(), *Interrupt.objects.all()]
    rows += [*Decision.objects.all(), *SessionEvent.objects.all(), *WebhookEndpoint.objects.all()]
    return serializers.serialize("json", rows)


def happened(operation: str, user: Any, invocation: Invocation, question: Any) -> bool:
    """Whether the operation's change is there."""
    if operation == "rotate":
        return WebhookEndpoint.objects.get(pk=invocation.pk).secret != invocation.first_secret
    if operation == "cancel":
        return Invocation.objects.get(pk=invocation.pk).status == "CANCELLED"
    if operation == "retry":
        return NodeRun.objects.get(invocation=invocation, name="question").attempt == 2
    question = Interrupt.objects.get(pk=question.pk)
    return {
        "answer": question.status == "resolved",
        "decide": Decision.objects.filter(interrupt=question, actor=user.pk).exists(),
        "claim": question.claimed_by_id is not None and question.claimed_by_id == user.pk,
        "release": question.claimed_by_id is None,
        "reassign": question.assignees == TARGET,
    }[operation]


# Each way in tries the operation and returns whether it said "refused" (None: it does not
# say in a way a client reads; the admin reports it in a message).


def through_services(operation: str, user: Any, invocation: Invocation, question: Any) -> bool:
    calls = {
        "answer": lambda: services.submit_function_responses(
            [{"id": question.pk, "response": YES}], actor=user
        ),
        "decide": lambda: services.decide(question.pk, YES, actor=user),
        "claim": lambda: services.claim(question.pk, actor=user),
        "release": lambda: services.release(question.pk, actor=user),
        "reassign": lambda: services.reassign(question.pk, TARGET, actor=user),
        "cancel": lambda: services.cancel(invocation.pk, actor=user),
        "retry": lambda: services.retry(invocation.pk, actor=user),
        "rotate": lambda: webhooks.rotate_webhook_secret(invocation, actor=user),
    }
    try:
        calls[operation]()
    except PermissionDenied:
        return True
    return False


def through_api(operation: str, user: Any, invocation: Invocation, question: Any) -> bool:
    client = APIClient()
    if user.is_authenticated:
        token = Token.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    if operation in ("cancel", "retry"):
        url, body = f"/api/invocations/{invocation.pk}/{operation}/", {}
    elif operation == "answer":
        url = "/api/function-responses/"
        body = {"function_responses": [{"id": question.pk, "response": YES}]}
    elif operation == "decide":
        url, body = f"/api/interrupts/{question.pk}/decisions/", {"response": YES}
    else:
        url, body = f"/api/interrupts/{question.pk}/{operation}/", {}
    response = client.post(url, body, format="json")
    # A question the caller may not see is a 404 for every action on it, as its detail.
    hidden = response.status_code == 404 and response.json()["error"] == "unknown_interrupt"
    assert response.status_code < 300 or response.status_code in (401, 403) or hidden, url
    return response.status_code in (401, 403) or hidden


def through_admin(operation: str, user: Any, invocation: Invocation, question: Any) -> None:
    client = Client()
    if user.is_authenticated:
        client.force_login(user)
    if operation in ("cancel", "retry"):
        url = reverse(f"admin:workflows_invocation_{operation}", args=[invocation.pk])
        data = {"post": "yes"}
    elif operation == "rotate":
        url = reverse("admin:workflows_webhookendpoint_changelist")
        data = {"action": "rotate_secret", ACTION_CHECKBOX_NAME: [invocation.pk]}
    else:
        url = decision_url(question.pk)
        data = {
            "decide": {"decision": "approve"},
            "claim": {"_action": "claim"},
            "release": {"_action": "release"},
            "reassign": {"_action": "reassign", "assignees": ", ".join(TARGET)},
        }[operation]
    assert client.post(url, data).status_code in (200, 302, 403)


THROUGH = {"services": through_services, "api": through_api, "admin": through_admin}
CASES = [
    pytest.param(operation, channel, principal, id=f"{operation}-{channel}-{principal}")
    for operation, channels in CHANNELS.items()
    for channel in channels
    for principal in PRINCIPALS
]


@pytest.mark.parametrize(("operation", "channel", "principal"), CASES)
def test_permission_matrix(operation, channel, principal):
    invocation, question, people = scene(operation)
    user = people.get(principal) or person(principal)
    before = snapshot()
    refused = THROUGH[channel](operation, user, invocation, question)
    allowed = happened(operation, user, invocation, question)
    assert allowed == EXPECTED[principal, operation]
    if refused is not None:
        assert refused == (not allowed), "refused, and said so; or allowed, and said so"
    if not allowed:
        assert snapshot() == before, "a refusal changes nothing"
