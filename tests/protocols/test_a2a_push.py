"""A2A push notifications (DESIGN 4.5) on the signed webhooks: a task's push config is an
endpoint that hears of its invocation only; its deliveries carry the task, the config's
token, the Standard Webhooks signature, and are retried like every webhook."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from tests.api.receiver import webhook_receiver
from tests.factories import ApproverFactory
from tests.protocols.a2a_serving import (  # noqa: F401
    a2a_client,
    run,
    send,
    serve_a2a_site,
    start_message,
    starter,
    token_of,
)
from workflows import services, webhooks
from workflows.models import Interrupt, WebhookDelivery, WebhookEndpoint
from workflows.protocols.a2a_agent import push

pytestmark = pytest.mark.django_db(transaction=True)


async def anywhere(url: str) -> bool:
    return True


async def configure(base_url: str, token: str, config: a2a.TaskPushNotificationConfig) -> Any:
    client = await a2a_client(base_url, token)
    try:
        created = await client.create_task_push_notification_config(config)
        listed = await client.list_task_push_notification_configs(
            a2a.ListTaskPushNotificationConfigsRequest(task_id=config.task_id)
        )
    finally:
        await client.close()
    return created, listed


def waiting_on_amy(a2a_site: str, token: str) -> a2a.Task:
    ApproverFactory(username="amy")
    return run(send(a2a_site, token, start_message({"assignees": ["user:amy"]})))


def test_the_task_is_pushed_when_it_ends_signed_with_the_token_and_retried(a2a_site, monkeypatch):
    monkeypatch.setattr(push, "url_allowed", anywhere)  # the receiver is on loopback
    token = token_of(starter())
    asked = waiting_on_amy(a2a_site, token)
    secret = WebhookEndpoint().secret

    with webhook_receiver(secret, statuses=[503]) as receiver:
        config = a2a.TaskPushNotificationConfig(task_id=asked.id, url=receiver.url, token="t-1")
        created, listed = run(configure(a2a_site, token, config))
        WebhookEndpoint.objects.filter(pk=created.id).update(secret=secret)
        services.decide(
            Interrupt.objects.get().pk,
            {"approved": True},
            actor=ApproverFactory._meta.model.objects.get(username="amy"),
        )

    assert [c.id for c in listed.configs] == [created.id]
    (received,) = receiver.received
    assert received.headers["x-a2a-notification-token"] == "t-1"
    assert received.body["task"]["id"] == asked.id
    assert received.body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert received.body["task"]["artifacts"][0]["parts"][0]["data"] == {"approved": True}
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_a_site_endpoint_does_not_hear_a_tasks_push_and_a_push_config_hears_one_task(
    a2a_site, monkeypatch
):
    monkeypatch.setattr(push, "url_allowed", anywhere)
    token = token_of(starter())
    asked = waiting_on_amy(a2a_site, token)
    run(
        configure(
            a2a_site,
            token,
            a2a.TaskPushNotificationConfig(task_id=asked.id, url="https://push.example/"),
        )
    )

    assert list(webhooks.site_endpoints()) == []
    other = run(send(a2a_site, token, start_message({"assignees": ["user:amy"]})))
    assert other.id != asked.id
    assert WebhookDelivery.objects.count() == 0  # the config's task had no new question


def test_a_push_url_on_a_private_address_is_refused_and_nothing_stored(a2a_site):
    token = token_of(starter())
    asked = waiting_on_amy(a2a_site, token)

    for url in ("http://127.0.0.1:9/hooks", "http://169.254.169.254/latest", "file:///etc/passwd"):
        config = a2a.TaskPushNotificationConfig(task_id=asked.id, url=url)
        with pytest.raises(InvalidParamsError, match="may not receive push notifications"):
            run(configure(a2a_site, token, config))

    assert WebhookEndpoint.objects.count() == 0


def test_another_users_task_takes_no_push_config(a2a_site, monkeypatch):
    monkeypatch.setattr(push, "url_allowed", anywhere)
    asked = waiting_on_amy(a2a_site, token_of(starter()))
    config = a2a.TaskPushNotificationConfig(task_id=asked.id, url="https://push.example/")

    with pytest.raises(TaskNotFoundError):
        run(configure(a2a_site, token_of(starter("mallory")), config))

    assert WebhookEndpoint.objects.count() == 0


def test_a_config_sent_with_the_start_hears_of_the_first_question(a2a_site, monkeypatch):
    monkeypatch.setattr(push, "url_allowed", anywhere)
    token = token_of(starter())
    secret = WebhookEndpoint().secret

    with webhook_receiver(secret) as receiver:
        config = a2a.TaskPushNotificationConfig(url=receiver.url, token="t-2")
        request = a2a.SendMessageRequest(
            message=start_message({"assignees": ["user:sam"]}),
            configuration=a2a.SendMessageConfiguration(task_push_notification_config=config),
        )
        # The endpoint the config becomes signs with the receiver's secret.
        monkeypatch.setattr(
            WebhookEndpoint._meta.get_field("secret"), "_get_default", lambda: secret
        )
        asked = run(send_request(a2a_site, token, request))

    (received,) = receiver.received
    assert received.body["task"]["id"] == asked.id
    assert received.body["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert received.headers["x-a2a-notification-token"] == "t-2"


async def send_request(base_url: str, token: str, request: a2a.SendMessageRequest) -> a2a.Task:
    client = await a2a_client(base_url, token)
    try:
        return [event async for event in client.send_message(request)][-1].task
    finally:
        await client.close()
