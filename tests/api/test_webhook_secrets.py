"""Webhook secrets in the admin: anyone who reads one can forge webhooks, so pages show it
masked; it is write-only in the form (blank keeps it) and refused when it cannot sign; the
rotate action makes a new one, shown once to who rotated it, through a service that checks
workflows.change_webhookendpoint."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied

from tests.factories import StaffFactory
from workflows import webhooks
from workflows.models import WebhookEndpoint

from .conftest import user_with
from .receiver import webhook_receiver

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "/admin/workflows/webhookendpoint/"
VIEW = "workflows.view_webhookendpoint"
CHANGE = "workflows.change_webhookendpoint"


def staff(*permissions):
    return user_with(*permissions, is_staff=True)


@pytest.fixture
def hook():
    return WebhookEndpoint.objects.create(url="https://hooks.example.com/in", description="ops")


def change_page(hook):
    return f"{CHANGELIST}{hook.pk}/change/"


def form_data(hook, **fields):
    return {"url": hook.url, "events": "[]", "is_active": "on", "description": "ops", **fields}


def secret_messages(response):
    return [str(m) for m in response.context["messages"] if "secret" in str(m)]


def test_staff_who_may_only_view_see_the_secret_masked_and_nowhere_else(client, hook):
    client.force_login(staff(VIEW))
    page = client.get(change_page(hook)).content.decode()
    assert hook.secret not in page
    assert hook.secret[len("whsec_") :][:8] not in page  # no part of it either, but the tail
    assert f"whsec_…{hook.secret[-4:]}" in page
    listing = client.get(CHANGELIST).content.decode()
    assert hook.secret not in listing
    assert "rotate_secret" not in listing  # the action needs the change permission


def test_staff_who_may_change_write_the_secret_but_never_read_it(client, hook):
    client.force_login(staff(VIEW, CHANGE))
    page = client.get(change_page(hook)).content.decode()
    assert hook.secret not in page
    assert 'type="password" name="secret"' in page
    old = hook.secret
    assert client.post(change_page(hook), form_data(hook, secret="")).status_code == 302
    hook.refresh_from_db()
    assert hook.secret == old  # left blank: kept
    refused = client.post(change_page(hook), form_data(hook, secret="whsec_a"))
    assert refused.status_code == 200
    assert "this secret cannot sign webhooks" in refused.content.decode()
    hook.refresh_from_db()
    assert hook.secret == old
    typed = WebhookEndpoint().secret
    saved = client.post(change_page(hook), form_data(hook, secret=typed), follow=True)
    hook.refresh_from_db()
    assert hook.secret == typed
    assert typed not in saved.content.decode()


def test_rotating_shows_the_new_secret_once_and_deliveries_are_signed_with_it(client, hook):
    client.force_login(staff(VIEW, CHANGE))
    old = hook.secret
    action = {"action": "rotate_secret", ACTION_CHECKBOX_NAME: [hook.pk], "index": 0}
    rotated = client.post(CHANGELIST, action, follow=True)
    hook.refresh_from_db()
    assert hook.secret != old
    (message,) = secret_messages(rotated)
    assert message == f"New secret of ops (rotated), shown only this once: {hook.secret}"
    assert hook.secret not in client.get(change_page(hook)).content.decode()
    with webhook_receiver(hook.secret) as receiver:
        WebhookEndpoint.objects.filter(pk=hook.pk).update(url=receiver.url)
        webhooks.queue_event("invocation.finished", lambda: {"n": 1})
    assert receiver.bad_signatures == [] and receiver.events() == ["invocation.finished"]


def test_rotating_needs_the_change_permission(client, hook):
    viewer = staff(VIEW)
    with pytest.raises(PermissionDenied):
        webhooks.rotate_webhook_secret(hook, actor=viewer)
    client.force_login(viewer)
    client.post(CHANGELIST, {"action": "rotate_secret", ACTION_CHECKBOX_NAME: [hook.pk]})
    secret = hook.secret
    hook.refresh_from_db()
    assert hook.secret == secret
    assert webhooks.rotate_webhook_secret(hook, actor=staff(CHANGE)) != secret


def test_a_new_endpoint_without_a_secret_gets_one_shown_once(client):
    client.force_login(StaffFactory())
    data = {"url": "https://hooks.example.com/new", "events": "[]", "is_active": "on"}
    added = client.post(f"{CHANGELIST}add/", data, follow=True)
    hook = WebhookEndpoint.objects.get()
    assert webhooks.secret_problem(hook.secret) == ""
    (message,) = secret_messages(added)
    assert message.endswith(f"(generated), shown only this once: {hook.secret}")
    assert hook.secret not in client.get(change_page(hook)).content.decode()
