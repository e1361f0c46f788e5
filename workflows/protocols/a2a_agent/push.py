"""A2A push notifications on the signed webhooks: a task's push config is a webhook
endpoint that hears of its invocation only. When a question opens (the task may need
input) and when the invocation ends, each of its endpoints gets the task (a StreamResponse,
as its creator sees it) in a webhook delivery: signed, recorded, retried with backoff,
with the config's token in `X-A2A-Notification-Token`."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.push_url_validator import validate_push_notification_url
from django.core.exceptions import ValidationError
from google.protobuf.json_format import MessageToDict

from workflows import signals, webhooks
from workflows.models import Interrupt, WebhookEndpoint
from workflows.protocols.a2a_agent.messages import refusals_named
from workflows.protocols.a2a_agent.tasks import task_of, visible_invocation

# Whether a client's URL may receive pushes: public http(s) hosts only (no loopback,
# private or link-local address), the SDK's policy. A module attribute, so a test of a
# receiver on loopback can allow it.
url_allowed = validate_push_notification_url


def config_of(endpoint: WebhookEndpoint) -> a2a.TaskPushNotificationConfig:
    return a2a.TaskPushNotificationConfig(
        id=str(endpoint.pk),
        task_id=str(endpoint.invocation_id),
        url=endpoint.url,
        token=endpoint.notification_token,
    )


def _endpoints(task_id: str, user: Any) -> Any:
    with refusals_named():
        invocation = visible_invocation(task_id, user)
    return WebhookEndpoint.objects.filter(invocation=invocation, created_by=user).order_by("pk")


def _endpoint(task_id: str, config_id: str, user: Any) -> WebhookEndpoint:
    found = _endpoints(task_id, user).filter(pk=int(config_id) if config_id.isdigit() else None)
    endpoint = found.first()
    if endpoint is None:
        raise TaskNotFoundError(f"no push notification config {config_id!r} on task {task_id}")
    return endpoint


async def check_url(url: str) -> None:
    if not await url_allowed(url):
        raise InvalidParamsError(
            f"{url!r} may not receive push notifications: it is not an http(s) URL of a public host"
        )


def create(config: a2a.TaskPushNotificationConfig, user: Any) -> a2a.TaskPushNotificationConfig:
    """The config, stored as an endpoint of the task's invocation (its URL checked first,
    by `check_url`)."""
    with refusals_named():
        invocation = visible_invocation(config.task_id, user)
    try:
        endpoint = webhooks.watch_invocation(invocation, config.url, config.token, actor=user)
    except ValidationError as exc:
        raise InvalidParamsError(f"{config.url!r}: {'; '.join(exc.messages)}") from None
    return config_of(endpoint)


def get(params: a2a.GetTaskPushNotificationConfigRequest, user: Any) -> Any:
    return config_of(_endpoint(params.task_id, params.id, user))


def listed(params: a2a.ListTaskPushNotificationConfigsRequest, user: Any) -> Any:
    configs = [config_of(e) for e in _endpoints(params.task_id, user)]
    return a2a.ListTaskPushNotificationConfigsResponse(configs=configs)


def delete(params: a2a.DeleteTaskPushNotificationConfigRequest, user: Any) -> None:
    webhooks.stop_watching(_endpoint(params.task_id, params.id, user))


def notify(invocation_id: Any, event_type: str) -> None:
    """Queue the task, as each config's creator sees it, to the invocation's endpoints."""
    if not webhooks.endpoints_known.any_active():  # a site without webhooks: no query
        return
    endpoints = WebhookEndpoint.objects.filter(invocation_id=invocation_id, is_active=True)
    for endpoint in endpoints.select_related("created_by"):
        invocation = visible_invocation(str(invocation_id), endpoint.created_by)
        task = MessageToDict(task_of(invocation, endpoint.created_by))
        webhooks.queue_delivery(endpoint, event_type, {"task": task})


@webhooks.never_raises
def on_interrupt_opened(sender: Any, interrupt_id: str, **kwargs: Any) -> None:
    if not webhooks.endpoints_known.any_active():
        return
    rows = Interrupt.objects.filter(pk=interrupt_id).values("invocation_id")[:1]
    for row in rows:
        notify(row["invocation_id"], "interrupt.opened")


@webhooks.never_raises
def on_invocation_finished(sender: Any, invocation_id: Any, **kwargs: Any) -> None:
    notify(invocation_id, "invocation.finished")


def connect() -> None:
    """Connect the receivers (WorkflowsConfig.ready, when a2a-sdk is installed)."""
    signals.interrupt_opened.connect(on_interrupt_opened, dispatch_uid="hitl-a2a-push-opened")
    signals.invocation_finished.connect(
        on_invocation_finished, dispatch_uid="hitl-a2a-push-finished"
    )
