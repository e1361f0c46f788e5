"""Cancel and retry have one rule, `user.has_perm("workflows.cancel_invocation",
invocation)` (`retry_invocation`): the model permission, or having started the invocation.
The services check it, the API and the admin ask it, and a data migration gave it to whoever
held `workflows.change_invocation` before."""

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from rest_framework.test import APIClient

from tests.asking import WORKFLOW, ask
from tests.factories import StaffFactory, UserFactory, grant_answer
from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun
from workflows.policy import CANCEL_PERMISSION, RETRY_PERMISSION

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *NodeRun.objects.all(), *Interrupt.objects.all()]
    return serializers.serialize("json", rows)


def staff(*codenames: str, **fields):
    """A staff user who may view the monitor, with these workflows permissions too."""
    return grant_answer(UserFactory(is_staff=True, **fields), "view_invocation", *codenames)


def failed(user=None) -> Invocation:
    """A FAILED invocation (its question is badly made, so the asking node fails)."""
    invocation = services.start(WORKFLOW, {"request": {"quorum": 0}}, user=user)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.FAILED
    return invocation


def waiting(user=None) -> Invocation:
    return Invocation.objects.get(pk=ask(user=user).invocation_id)


def test_the_rule_the_model_permission_or_the_starter():
    starter = staff()
    invocation = waiting(user=starter)
    system_started = waiting()
    holders = {perm: staff(perm.split(".")[1]) for perm in (CANCEL_PERMISSION, RETRY_PERMISSION)}
    for permission in (CANCEL_PERMISSION, RETRY_PERMISSION):
        assert starter.has_perm(permission, invocation)
        assert not starter.has_perm(permission, system_started)
        assert holders[permission].has_perm(permission, system_started)
        other = RETRY_PERMISSION if permission == CANCEL_PERMISSION else CANCEL_PERMISSION
        assert not holders[other].has_perm(permission, system_started)
        assert StaffFactory().has_perm(permission, system_started)
        # Nobody signed in is not "whoever started" a system invocation (both have no id).
        assert not AnonymousUser().has_perm(permission, system_started)
        starter.is_active = False
        assert not starter.has_perm(permission, invocation)
        starter.is_active = True
    assert not staff("change_invocation").has_perm(CANCEL_PERMISSION, system_started)


def test_the_services_check_the_rule_for_a_person():
    starter, outsider = staff(), staff("cancel_invocation")
    mine, theirs = failed(user=starter), failed(user=outsider)
    before = snapshot()
    with pytest.raises(PermissionDenied, match=r"did not start .* lacks the permission workflows"):
        services.retry(theirs, actor=starter)
    with pytest.raises(PermissionDenied, match="retry_invocation"):
        services.retry(mine.pk, actor=outsider)
    assert snapshot() == before
    services.retry(mine.pk, actor=starter)
    assert NodeRun.objects.get(invocation=mine, name="question").attempt == 2
    services.cancel(mine.pk, actor=outsider)
    services.cancel(theirs, actor=None)  # the system
    statuses = set(Invocation.objects.values_list("status", flat=True))
    assert statuses == {NodeStatus.CANCELLED}


def test_the_api_asks_the_same_rule():
    def api(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    invocation = waiting(user=staff())
    before = snapshot()
    changer = api(staff("change_invocation"))
    response = changer.post(f"/api/invocations/{invocation.pk}/cancel/")
    assert response.status_code == 403
    assert "lacks the permission workflows.cancel_invocation" in response.json()["detail"]
    assert snapshot() == before
    # No view permission needed: acting on one invocation finds it among all of them.
    canceller = api(grant_answer(UserFactory(), "cancel_invocation"))
    assert canceller.post(f"/api/invocations/{invocation.pk}/cancel/").status_code == 200


def test_the_monitor_offers_cancel_and_retry_to_whom_the_rule_allows(client):
    starter, outsider = staff(), staff()
    mine, theirs = failed(user=starter), failed(user=outsider)
    client.force_login(starter)
    page = client.get(reverse("admin:workflows_invocation_change", args=[mine.pk]))
    retry_url = reverse("admin:workflows_invocation_retry", args=[mine.pk])
    assert page.context["can_retry"] and f'action="{retry_url}"' in page.content.decode()
    assert "Retry invocation" in page.content.decode()
    others = client.get(reverse("admin:workflows_invocation_change", args=[theirs.pk]))
    assert not others.context["can_retry"] and "Retry invocation" not in others.content.decode()

    before = snapshot()
    theirs_url = reverse("admin:workflows_invocation_retry", args=[theirs.pk])
    assert client.post(theirs_url).status_code == 403
    assert client.get(retry_url).status_code == 405
    assert snapshot() == before
    response = client.post(retry_url, follow=True)
    assert "Retried 1 invocation(s)." in response.content.decode()
    assert NodeRun.objects.get(invocation=mine, name="question").attempt == 2


def test_the_starter_may_cancel_their_own_invocation_in_the_monitor(client):
    starter = staff()
    mine, theirs = waiting(user=starter), waiting()
    client.force_login(starter)
    cancel = reverse("admin:workflows_invocation_cancel", args=[mine.pk])
    page = client.get(reverse("admin:workflows_invocation_change", args=[mine.pk]))
    assert cancel in page.content.decode()
    theirs_cancel = reverse("admin:workflows_invocation_cancel", args=[theirs.pk])
    assert client.post(theirs_cancel, {"post": "yes"}).status_code == 403
    client.post(cancel, {"post": "yes"})
    statuses = dict(Invocation.objects.values_list("pk", "status"))
    assert (statuses[mine.pk], statuses[theirs.pk]) == (NodeStatus.CANCELLED, NodeStatus.WAITING)


MIGRATION = importlib.import_module("workflows.migrations.0005_cancel_retry_rule")


def codenames(permissions) -> set[str]:
    return set(permissions.values_list("codename", flat=True))


def test_the_migration_gives_holders_of_change_invocation_cancel_and_retry():
    change = Permission.objects.get(codename="change_invocation")
    user, group, bystander = UserFactory(), Group.objects.create(name="ops"), UserFactory()
    user.user_permissions.add(change)
    group.permissions.add(change)
    Permission.objects.filter(codename__in=["cancel_invocation", "retry_invocation"]).delete()

    MIGRATION.grant_cancel_and_retry(apps, None)
    MIGRATION.grant_cancel_and_retry(apps, None)  # twice: nothing is granted twice

    granted = {"change_invocation", "cancel_invocation", "retry_invocation"}
    assert codenames(user.user_permissions) == granted == codenames(group.permissions)
    assert codenames(bystander.user_permissions) == set()
    member = UserFactory()
    member.groups.add(group)
    assert member.has_perm(CANCEL_PERMISSION, waiting())
