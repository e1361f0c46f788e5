"""Every door against every rule a question carries (DESIGN 4.1: "checked in one place
that every door passes through"). What each door must do is read from TABLE below, never
from the code under test.

Doors: the two services a protocol adapter calls, the API's two ways to answer, the signed
e-mail link (made for one person) and Slack link (posted to a channel, for whoever opens
it), the admin's decision page and its bulk approve.

Cells: `ok` (the question is answered; a decision door also recorded the actor's
Decision), `vote` (the actor's Decision is recorded, the question still waits), `n/a`
(the door cannot give that answer: a link and bulk approve say only yes or no), or a
refusal: `no` where the door tells a person (pages), else the code it tells a client
(services, API: status and `error`), abbreviated in CODES. Every refusal leaves every
table as it was: no Decision, no answer, no audit entry, no sign count moved, no grant.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.links import DecisionLink, make_token
from tests.approvals.conftest import INBOX, decision_url
from tests.asking import ask
from tests.factories import ApproverFactory, grant_answer
from tests.gates.gated import CHARGE, pending
from tests.passkeys.conftest import enrol, signature
from workflows import services
from workflows.api.exceptions import STATUS_BY_CODE
from workflows.engine.errors import WorkflowError
from workflows.engine.status import InterruptStatus
from workflows.models import (
    AuditEntry,
    Decision,
    Delegation,
    Grant,
    Interrupt,
    Invocation,
    NodeRun,
    PasskeyCredential,
)

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = """
rule                   svc_ans  svc_dec  api_ans  api_dec  email  slack  page   bulk
assignee               ok       ok       ok       ok       ok     ok     ok     ok
non_assignee           deny     deny     deny     hidden   no     no     no     no
four_eyes_other        ok       ok       ok       ok       ok     ok     ok     ok
four_eyes_starter      deny     deny     deny     hidden   no     no     no     no
delegate_of_starter    deny     deny     deny     hidden   no     no     no     no
delegate_of_assignee   ok       ok       ok       ok       ok     ok     ok     ok
expired_delegation     deny     deny     deny     hidden   no     no     no     no
quorum_direct          quorum   vote     quorum   vote     vote   vote   vote   vote
second_vote            quorum   twice    quorum   twice    no     no     no     no
signature_missing      unsigned unsigned unsigned unsigned no     no     no     no
signature_invalid      unsigned badsig   unsigned badsig   no     no     no     no
signature_valid        unsigned ok       unsigned ok       no     no     ok     no
remember_always        deny     deny     deny     deny     n/a    n/a    no     n/a
remember_always_staff  ok       ok       ok       ok       n/a    n/a    ok     n/a
"""
# The refusals by the code a client reads (the services' exception, the API's `error`).
CODES = {
    "deny": "permission_denied",
    # The API's actions on a question the caller may not see: a 404, as its detail.
    "hidden": "unknown_interrupt",
    "unsigned": "signature_required",
    "badsig": "invalid_signature",
    "quorum": "decision_required",
    "twice": "already_decided",
}


def expected_table() -> dict[tuple[str, str], str]:
    header, *rows = TABLE.strip().splitlines()
    doors = header.split()[1:]
    return {
        (rule, door): cell
        for rule, *cells in map(str.split, rows)
        for door, cell in zip(doors, cells, strict=True)
    }


EXPECTED = expected_table()
DOORS = TABLE.strip().splitlines()[0].split()[1:]
RULES = [line.split()[0] for line in TABLE.strip().splitlines()[1:]]
DECISION_DOORS = {"svc_dec", "api_dec", "email", "slack", "page", "bulk"}
YES = {"approved": True}
ALWAYS = {"decision": "approve", "remember": "always"}


@dataclass
class Scene:
    """A question, who tries to answer it, the answer and what signs it (None: nothing)."""

    question: Interrupt
    actor: Any
    response: dict[str, Any] = field(default_factory=lambda: dict(YES))
    assertion: dict[str, Any] | None = None
    page_fields: dict[str, str] = field(default_factory=lambda: {"decision": "approve"})


def reviewer(name: str) -> Any:
    user = ApproverFactory(username=name)
    user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    return user


def delegation(delegator: Any, delegate: Any, start_hours: float, end_hours: float) -> None:
    now = timezone.now()
    Delegation.objects.create(
        delegator=delegator,
        delegate=delegate,
        starts_at=now + timedelta(hours=start_hours),
        ends_at=now + timedelta(hours=end_hours),
    )


def four_eyes_question() -> tuple[Interrupt, Any, Any]:
    sam, ann = reviewer("sam"), reviewer("ann")
    question = ask(user=sam, assignees=["group:reviewers"], four_eyes=True)
    return question, sam, ann


def signed_scene(assertion: str) -> Scene:
    ann = ApproverFactory(username="ann")
    _, key = enrol(ann)
    question = ask(assignees=["user:ann"], require_signature=True)
    signed = {
        "none": None,
        "other answer": signature(key, question, {"approved": False}),
        "this answer": signature(key, question, YES),
    }[assertion]
    return Scene(question, ann, assertion=signed)


def gate_scene(*permissions: str) -> Scene:
    """A gate anyone may answer; its approver remembers the approval `always`."""
    gus = grant_answer(ApproverFactory(username="gus"), *permissions)
    invocation = services.start(CHARGE, {"amount": 40})
    page = {"decision": "approve", "remember": "always"}
    return Scene(pending(invocation), gus, response=dict(ALWAYS), page_fields=page)


def quorum_scene(voted_already: bool) -> Scene:
    ann, cy = ApproverFactory(username="ann"), ApproverFactory(username="cy")
    question = ask(assignees=["user:ann", "user:cy"], quorum=2)
    if voted_already:
        services.decide(question.pk, YES, actor=ann)
    return Scene(question, ann if voted_already else cy)


def _non_assignee() -> Scene:
    ApproverFactory(username="ann")
    return Scene(ask(assignees=["user:ann"]), ApproverFactory(username="oscar"))


def _delegate_of_starter() -> Scene:
    question, sam, ann = four_eyes_question()
    delegation(sam, ann, -1, 24)  # ann is a reviewer herself, but stands in for the starter
    return Scene(question, ann)


def _delegate_of(start_hours: float, end_hours: float) -> Scene:
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    delegation(ada, bob, start_hours, end_hours)
    return Scene(ask(assignees=["user:ada"]), bob)


SCENES: dict[str, Callable[[], Scene]] = {
    "assignee": lambda: Scene(ask(assignees=["user:ann"]), ApproverFactory(username="ann")),
    "non_assignee": _non_assignee,
    "four_eyes_other": lambda: Scene(*four_eyes_question()[::2]),
    "four_eyes_starter": lambda: Scene(*four_eyes_question()[:2]),
    "delegate_of_starter": _delegate_of_starter,
    "delegate_of_assignee": lambda: _delegate_of(-1, 24),
    "expired_delegation": lambda: _delegate_of(-48, -2),
    "quorum_direct": lambda: quorum_scene(voted_already=False),
    "second_vote": lambda: quorum_scene(voted_already=True),
    "signature_missing": lambda: signed_scene("none"),
    "signature_invalid": lambda: signed_scene("other answer"),
    "signature_valid": lambda: signed_scene("this answer"),
    "remember_always": lambda: gate_scene(),
    "remember_always_staff": lambda: gate_scene("add_grant"),
}


def snapshot() -> str:
    rows: list[Any] = [*Invocation.objects.all(), *NodeRun.objects.all()]
    rows += [*Interrupt.objects.all(), *Decision.objects.all(), *AuditEntry.objects.all()]
    rows += [*PasskeyCredential.objects.all(), *Grant.objects.all()]
    return serializers.serialize("json", rows)


# Each door tries the scene's answer and returns the refusal code it tells a client (None:
# accepted; a page tells a person, whose outcome is read from the tables).


def _service_code(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except WorkflowError as exc:
        return exc.code
    except PermissionDenied as exc:  # passkeys.SignatureRefused carries its own code
        return getattr(exc, "code", "permission_denied")
    return None


def svc_answer(scene: Scene) -> str | None:
    answer = [{"id": scene.question.pk, "response": scene.response}]
    return _service_code(lambda: services.submit_function_responses(answer, actor=scene.actor))


def svc_decide(scene: Scene) -> str | None:
    return _service_code(
        lambda: services.decide(
            scene.question.pk, scene.response, actor=scene.actor, assertion=scene.assertion
        )
    )


def _api(scene: Scene) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=scene.actor)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def _api_code(response: Any) -> str | None:
    if response.status_code == 202:
        return None
    code = response.json()["error"]
    assert response.status_code == STATUS_BY_CODE.get(code, 403), response.json()
    return code


def api_answer(scene: Scene, client: APIClient) -> str | None:
    # An assertion sent along is no way around the rule: a direct answer carries none.
    item = {"id": scene.question.pk, "response": scene.response, "assertion": scene.assertion}
    body = {"function_responses": [item]}
    return _api_code(client.post("/api/function-responses/", body, format="json"))


def api_decide(scene: Scene, client: APIClient) -> str | None:
    body = {"response": scene.response, "assertion": scene.assertion}
    url = f"/api/interrupts/{scene.question.pk}/decisions/"
    return _api_code(client.post(url, body, format="json"))


def _logged_in(scene: Scene) -> Client:
    client = Client()
    client.force_login(scene.actor)
    return client


def link(scene: Scene, client: Client, user_id: Any) -> str | None:
    token = make_token(DecisionLink(scene.question.pk, user_id, "approve"))
    client.post(f"/approvals/email/{token}/", {})
    return None  # the page tells a person; what happened is read from the tables


def page(scene: Scene, client: Client) -> str | None:
    fields = dict(scene.page_fields)
    if scene.assertion is not None:
        fields["assertion"] = json.dumps(scene.assertion)
    assert client.post(decision_url(scene.question), fields).status_code in (200, 302, 403)
    return None


def bulk(scene: Scene, client: Client) -> str | None:
    selected = {"action": "approve_selected", "_selected_action": [scene.question.pk]}
    assert client.post(INBOX, selected).status_code in (200, 302, 403)
    return None


def client_for(door: str, scene: Scene) -> Any:
    """What the door is reached with, made before the snapshot (a token, a session)."""
    if door.startswith("api_"):
        return _api(scene)
    if door in ("email", "slack", "page", "bulk"):
        return _logged_in(scene)
    return None


def through(door: str, scene: Scene, client: Any) -> str | None:
    if door == "svc_ans":
        return svc_answer(scene)
    if door == "svc_dec":
        return svc_decide(scene)
    if door in ("api_ans", "api_dec"):
        return {"api_ans": api_answer, "api_dec": api_decide}[door](scene, client)
    if door == "email":
        return link(scene, client, scene.actor.pk)
    if door == "slack":  # a channel's link names no one
        return link(scene, client, None)
    return {"page": page, "bulk": bulk}[door](scene, client)


def decisions_by(scene: Scene) -> int:
    return Decision.objects.filter(interrupt=scene.question.pk, actor=scene.actor.pk).count()


def outcome(door: str, scene: Scene, decisions_before: int) -> str:
    """What the door did, read from the tables: ok (answered), vote or nothing."""
    question = Interrupt.objects.get(pk=scene.question.pk)
    decided = decisions_by(scene) > decisions_before
    if question.status == InterruptStatus.RESOLVED:
        assert door not in DECISION_DOORS or decided, "a decision door answers by one"
        return "ok"
    return "vote" if decided else "nothing"


CASES = [
    pytest.param(rule, door, id=f"{rule}-{door}")
    for rule in RULES
    for door in DOORS
    if EXPECTED[rule, door] != "n/a"
]


@pytest.mark.parametrize(("rule", "door"), CASES)
def test_every_door_applies_every_rule(rule, door):
    scene = SCENES[rule]()
    client = client_for(door, scene)
    before, decisions_before = snapshot(), decisions_by(scene)
    told = through(door, scene, client)
    expected = EXPECTED[rule, door]
    done = outcome(door, scene, decisions_before)
    if expected in ("ok", "vote"):
        assert (done, told) == (expected, None)
        return
    assert done == "nothing", f"{door} let {rule} through"
    assert snapshot() == before, "a refusal stores nothing"
    if expected != "no":
        assert told == CODES[expected]


def test_the_table_covers_every_door_and_rule():
    assert sorted(SCENES) == sorted(RULES)
    assert len(DOORS) == 8
    assert all(cell for cell in EXPECTED.values())
