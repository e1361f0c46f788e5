"""The admin's side of gates: the monitor shows each node run's effects and the grant it
passed on; the grants list is scoped and its revoke action asks the rule per grant."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.urls import reverse

from tests.factories import ApproverFactory, StaffFactory, grant_answer
from tests.gates.gated import CHARGE
from workflows import services
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Effect, Grant, Interrupt

pytestmark = pytest.mark.django_db(transaction=True)

GRANTS = "/admin/workflows/grant/"


def monitor_url(invocation) -> str:
    return reverse("admin:workflows_invocation_change", args=[quote(invocation.pk)])


def test_the_monitor_shows_each_node_runs_effects_and_the_grant_it_passed_on(client):
    boss = grant_answer(StaffFactory(username="boss"), "add_grant")
    first = services.start(CHARGE, {"amount": 12})
    interrupt = Interrupt.objects.get(invocation=first, status=InterruptStatus.PENDING)
    services.decide(interrupt.pk, {"decision": "approve", "remember": "always"}, actor=boss)
    second = services.start(CHARGE, {"amount": 13})
    second.refresh_from_db()
    assert second.status == NodeStatus.COMPLETED
    effect = Effect.objects.get(invocation=second)
    assert (effect.name, effect.status, effect.result) == (
        "bank",
        "finished",
        {"charged": 13, "receipt": effect.result["receipt"]},
    )
    client.force_login(boss)
    page = client.get(monitor_url(second)).content.decode()
    assert 'class="hitl-effect-finished"' in page and "<td>bank</td>" in page
    grant = Grant.objects.get()
    assert reverse("admin:workflows_grant_change", args=[grant.pk]) in page
    Effect.objects.filter(pk=effect.pk).update(status="in_doubt")
    page = client.get(monitor_url(second)).content.decode()
    assert 'class="hitl-effect-in_doubt"' in page and "in doubt" in page


REVOKE = {"action": "revoke", "post": "yes"}  # the confirmation page's "Yes, revoke"


def test_the_grants_list_shows_an_approver_their_own_and_revoke_asks_the_rule(client):
    ada = ApproverFactory(username="ada")
    ben = ApproverFactory(username="ben")
    mine = Grant.objects.create(
        workflow_name=CHARGE, node_name="charge", scope="always", granted_by=ada
    )
    theirs = Grant.objects.create(
        workflow_name=CHARGE, node_name="charge", scope="always", granted_by=ben
    )
    client.force_login(ada)
    page = client.get(GRANTS).content.decode()
    assert reverse("admin:workflows_grant_change", args=[mine.pk]) in page
    assert reverse("admin:workflows_grant_change", args=[theirs.pk]) not in page
    assert client.get(reverse("admin:workflows_grant_change", args=[theirs.pk])).status_code in (
        302,
        403,
    )
    confirm = client.post(GRANTS, {"action": "revoke", "_selected_action": [mine.pk]})
    assert confirm.status_code == 200 and b"Yes, revoke" in confirm.content
    mine.refresh_from_db()
    assert mine.revoked_at is None, "the action asks before it revokes"
    response = client.post(GRANTS, {**REVOKE, "_selected_action": [mine.pk]}, follow=True)
    assert "Revoked 1 grant(s)." in [str(m) for m in get_messages(response.wsgi_request)]
    mine.refresh_from_db()
    assert mine.revoked_by == ada
    keeper = grant_answer(StaffFactory(username="keeper", is_superuser=False), "change_grant")
    client.force_login(keeper)
    client.post(GRANTS, {**REVOKE, "_selected_action": [theirs.pk]})
    theirs.refresh_from_db()
    assert theirs.revoked_by == keeper


def test_the_revoke_action_reports_a_refusal_and_changes_nothing(client):
    ada = ApproverFactory(username="ada")
    viewer = grant_answer(ApproverFactory(username="viewer"), "answer_interrupt", "view_grant")
    grant = Grant.objects.create(
        workflow_name=CHARGE, node_name="charge", scope="always", granted_by=ada
    )
    client.force_login(viewer)
    response = client.post(GRANTS, {**REVOKE, "_selected_action": [grant.pk]}, follow=True)
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("did not grant" in m for m in messages)
    grant.refresh_from_db()
    assert grant.revoked_at is None
