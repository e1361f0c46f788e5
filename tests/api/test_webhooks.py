"""Webhooks: each event reaches the endpoints that want it once, signed in the Standard
Webhooks format; failures are retried with backoff and every attempt is recorded; a
receiver failure never breaks the write that sent the signal; admin resends."""

import logging

import pytest
from django.contrib.admin.sites import AdminSite
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory, override_settings

from tests.factories import StaffFactory
from workflows import webhooks
from workflows.admin.webhooks import WebhookDeliveryAdmin
from workflows.models import WebhookDelivery, WebhookEndpoint

from .conftest import pending, start
from .receiver import webhook_receiver

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_EVENT = ["interrupt.opened", "decision.recorded", "interrupt.resolved", "invocation.finished"]


def endpoint(url, **fields):
    return WebhookEndpoint.objects.create(url=url, **fields)


def test_each_event_arrives_once_signed(api, operator):
    secret = WebhookEndpoint().secret  # a fresh whsec_ secret, as admin would make
    with webhook_receiver(secret) as receiver:
        endpoint(receiver.url, secret=secret)
        started = api.post(
            "/api/invocations/", {"workflow": "api_approval", "input": {}}, format="json"
        )
        question = pending(started.json()["id"])[0]
        api.post(
            f"/api/interrupts/{question.id}/decisions/",
            {"response": {"approved": True}},
            format="json",
        )
    assert receiver.bad_signatures == []
    assert sorted(receiver.events()) == sorted(EVERY_EVENT)
    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert len(set(ids)) == len(ids)
    by_type = {r.body["type"]: r.body["data"] for r in receiver.received}
    assert by_type["interrupt.opened"]["id"] == question.id
    assert by_type["interrupt.opened"]["response_schema"]["required"] == ["approved"]
    assert by_type["interrupt.resolved"]["response"] == {"approved": True}
    assert by_type["decision.recorded"]["actor"] == operator.pk
    assert by_type["invocation.finished"]["status"] == "COMPLETED"
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


def test_endpoints_get_only_the_events_they_chose(operator):
    with webhook_receiver(WebhookEndpoint().secret) as receiver:
        endpoint(receiver.url, secret=receiver.secret, events=["invocation.finished"])
        endpoint(receiver.url, secret=receiver.secret, is_active=False)
        invocation = start(user=operator)
        webhooks.on_invocation_finished(sender=None, invocation_id=invocation.pk)
    assert receiver.events() == ["invocation.finished"]


def test_failures_are_retried_and_every_attempt_recorded(settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 5}
    with webhook_receiver(WebhookEndpoint().secret, statuses=[500, 503]) as receiver:
        invocation = start()
        endpoint(receiver.url, secret=receiver.secret)
        (delivery,) = webhooks.queue_event(
            "invocation.finished", lambda: {"id": str(invocation.pk)}
        )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    attempts = list(delivery.attempt_log.values_list("status_code", flat=True))
    assert attempts == [500, 503, 204]
    assert all(a.duration_ms > 0 for a in delivery.attempt_log.all())
    assert "HTTP 500" in delivery.attempt_log.first().error
    assert len(receiver.received) == 1


def test_a_delivery_gives_up_after_the_last_attempt(settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 2}
    with webhook_receiver(WebhookEndpoint().secret) as receiver:
        url = receiver.url
    endpoint(url)  # the server is gone: connections are refused
    (delivery,) = webhooks.queue_event("invocation.finished", lambda: {})
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    errors = list(delivery.attempt_log.values_list("status_code", "error"))
    assert all(code is None and "refused" in error.lower() for code, error in errors), errors


def test_a_redirect_is_a_failed_attempt_and_is_not_followed(settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 1}
    with webhook_receiver(WebhookEndpoint().secret, statuses=[301]) as receiver:
        endpoint(receiver.url, secret=receiver.secret)
        (delivery,) = webhooks.queue_event("invocation.finished", lambda: {"n": 1})
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    ((status_code, error),) = delivery.attempt_log.values_list("status_code", "error")
    assert status_code == 301
    assert "redirects are not followed" in error and f"{receiver.url}/moved" in error
    assert receiver.gets == []  # no body-less GET to where the redirect pointed


def test_a_secret_that_cannot_sign_fails_each_attempt_with_the_reason(settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 2}
    with webhook_receiver(WebhookEndpoint().secret) as receiver:
        endpoint(receiver.url, secret="whsec_a")  # not base64
        (delivery,) = webhooks.queue_event("invocation.finished", lambda: {})
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)
    errors = list(delivery.attempt_log.values_list("status_code", "error"))
    assert len(errors) == 2
    assert all(code is None and "cannot sign" in error for code, error in errors), errors
    assert receiver.received == [] and receiver.bad_signatures == []


def test_signatures_verify_without_time_zone_support():
    with (
        override_settings(USE_TZ=False, TIME_ZONE="Asia/Tokyo"),
        webhook_receiver(WebhookEndpoint().secret) as receiver,
    ):
        endpoint(receiver.url, secret=receiver.secret)
        (delivery,) = webhooks.queue_event("invocation.finished", lambda: {"n": 1})
        delivery.refresh_from_db()
    assert receiver.bad_signatures == []
    assert receiver.events() == ["invocation.finished"]
    assert delivery.status == "delivered"


def test_only_http_and_https_endpoints_are_accepted_or_sent_to(client, settings):
    client.force_login(StaffFactory())
    form = {"secret": WebhookEndpoint().secret, "events": "[]", "is_active": "on"}
    for url in ("ftp://files.example.com/hooks", "file:///etc/passwd"):
        page = client.post("/admin/workflows/webhookendpoint/add/", {**form, "url": url})
        assert page.status_code == 200 and "Enter a valid URL." in page.content.decode(), url
    assert not WebhookEndpoint.objects.exists()
    added = {**form, "url": "https://hooks.example.com"}
    assert client.post("/admin/workflows/webhookendpoint/add/", added).status_code == 302
    assert WebhookEndpoint.objects.get().url == "https://hooks.example.com"
    # A row made in code skips validation; its deliveries are refused, not sent.
    WebhookEndpoint.objects.all().delete()
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 1}
    endpoint("file:///etc/passwd")
    (delivery,) = webhooks.queue_event("invocation.finished", lambda: {})
    (error,) = delivery.attempt_log.values_list("error", flat=True)
    assert "is not an http or https URL" in error


def test_backoff_doubles_and_is_capped(settings):
    settings.HITL = {
        **settings.HITL,
        "WEBHOOK_BACKOFF_SECONDS": 10,
        "WEBHOOK_MAX_BACKOFF_SECONDS": 60,
    }
    assert [webhooks.backoff(n) for n in range(5)] == [10, 20, 40, 60, 60]


def test_a_failing_receiver_never_breaks_the_write_path(api, operator, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("webhook store is down")

    monkeypatch.setattr(webhooks, "queue_event", broken)
    endpoint("http://127.0.0.1:9/never")
    with caplog.at_level(logging.ERROR, logger="workflows.webhooks"):
        started = api.post(
            "/api/invocations/", {"workflow": "api_approval", "input": {}}, format="json"
        )
        question = pending(started.json()["id"])[0]
        decided = api.post(
            f"/api/interrupts/{question.id}/decisions/",
            {"response": {"approved": False}},
            format="json",
        )
    assert (started.status_code, decided.status_code) == (202, 202)
    assert decided.json()["interrupt_status"] == "resolved"
    assert "webhook store is down" in caplog.text


def test_admin_resend_reports_what_it_did(settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 1}
    with webhook_receiver(WebhookEndpoint().secret, statuses=[500]) as receiver:
        endpoint(receiver.url, secret=receiver.secret)
        (delivery,) = webhooks.queue_event("invocation.finished", lambda: {"n": 1})
        delivery.refresh_from_db()
        assert delivery.status == "failed"
        request = RequestFactory().post("/admin/")
        request.user = StaffFactory()
        request.session = {}
        request._messages = FallbackStorage(request)
        model_admin = WebhookDeliveryAdmin(WebhookDelivery, AdminSite())
        model_admin.resend(request, WebhookDelivery.objects.filter(pk=delivery.pk))
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert list(delivery.attempt_log.values_list("status_code", flat=True)) == [500, 204]
    assert [str(m) for m in request._messages] == [
        "Queued 1 delivery for a fresh round of attempts."
    ]
    assert receiver.events() == ["invocation.finished"]


def test_admin_shows_each_attempt_of_a_delivery(client, settings):
    settings.HITL = {**settings.HITL, "WEBHOOK_MAX_ATTEMPTS": 1}
    endpoint("http://127.0.0.1:9/closed", description="ops hooks")
    (delivery,) = webhooks.queue_event("invocation.finished", lambda: {})
    client.force_login(StaffFactory())
    listing = client.get("/admin/workflows/webhookdelivery/")
    assert listing.status_code == 200
    assert "ops hooks" in listing.content.decode()
    page = client.get(f"/admin/workflows/webhookdelivery/{delivery.pk}/change/").content.decode()
    assert "Connection refused" in page or "ConnectionRefusedError" in page
    assert client.get("/admin/workflows/webhookendpoint/add/").status_code == 200


@pytest.fixture
def no_endpoint_known():
    webhooks.endpoints_known.forget()
    assert webhooks.queue_event("invocation.finished", dict) == []  # now remembered


def test_without_endpoints_an_event_costs_no_query(no_endpoint_known, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert webhooks.queue_event("invocation.finished", dict) == []


def test_an_endpoint_saved_here_gets_the_next_event_at_once(no_endpoint_known):
    endpoint("http://127.0.0.1:9/hook")
    assert len(webhooks.queue_event("invocation.finished", dict)) == 1


def test_an_endpoint_added_elsewhere_is_seen_once_the_cache_time_is_over(settings):
    settings.HITL = {"WEBHOOK_ENDPOINTS_CACHE_SECONDS": 0}
    webhooks.endpoints_known.forget()
    assert webhooks.queue_event("invocation.finished", dict) == []
    # bulk_create sends no signal: as seen from a process that did not save it.
    WebhookEndpoint.objects.bulk_create([WebhookEndpoint(url="http://127.0.0.1:9/hook")])
    assert len(webhooks.queue_event("invocation.finished", dict)) == 1
