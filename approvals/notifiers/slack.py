"""The Slack notifier (`"approvals.notifiers.slack.SlackNotifier"` in HITL["NOTIFIERS"]):
a Block Kit message per question through the Web API (slack_sdk), to the Slack user or
channel HITL["SLACK"]["USERS"] maps each assignee to, or to HITL["SLACK"]["CHANNEL"] when
none is mapped. The message carries the question, its priority and due date, and the
e-mail's signed links to approve, reject or open it; it is updated when the question is
reminded, escalated or decided (the SlackMessage rows remember where it is)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from slack_sdk import WebClient

from workflows.conf import hitl_settings
from workflows.engine.principals import parse_assignee
from workflows.engine.status import InterruptStatus
from workflows.models import Delegation, Interrupt
from workflows.notifications import (
    DECIDED,
    DELEGATED,
    ESCALATED,
    OPENED,
    REMINDED,
    SUPERSEDED,
    Undelivered,
)

from ..models import SlackMessage
from .slack_blocks import blocks, fallback_text

TIMEOUT_SECONDS = 10  # of one Web API call


class SlackNotifier:
    """Opened: post to each target of the assignees. Escalated: post to the new
    assignees' targets and update the earlier messages. Reminded, decided: update the
    messages. Delegated: a direct message to the delegate, when USERS maps them."""

    def __init__(self) -> None:
        config = hitl_settings.SLACK
        self.users: dict[str, str] = dict(config.get("USERS") or {})
        self.channel: str = config.get("CHANNEL") or ""
        self.client = WebClient(
            token=config.get("TOKEN") or None,
            base_url=config.get("BASE_URL") or WebClient.BASE_URL,
            timeout=TIMEOUT_SECONDS,
        )

    def enabled(self) -> bool:
        return bool(self.client.token)

    def targets(self, assignees: list[str]) -> dict[str, str]:
        """Where a question for `assignees` is posted: each mapped assignee's Slack id by
        assignee, or the default channel (under "") when none is mapped."""
        mapped = {name: self.users[name] for name in assignees if name in self.users}
        if not mapped and self.channel:
            return {"": self.channel}
        return mapped

    def notify(
        self,
        event: str,
        interrupt: Interrupt,
        *,
        delegation: Delegation | None = None,
        only: list[str] | None = None,
        **context: Any,
    ) -> None:
        """Post and update what `event` calls for; when some calls fail, raise Undelivered
        naming them, so that the retry (`only` those) repeats none that worked."""
        posted = {message.assignee: message for message in interrupt.slack_messages.all()}
        wanted: dict[str, str] = {}
        if event == DELEGATED and delegation is not None:
            name = f"user:{delegation.delegate.get_username()}"
            wanted = {name: self.users[name]} if name in self.users else {}
        elif event in (OPENED, ESCALATED) and interrupt.status == InterruptStatus.PENDING:
            wanted = self.targets(interrupt.assignees)
        calls = [(f"post:{n}", n, channel) for n, channel in wanted.items() if n not in posted]
        if event in (ESCALATED, DECIDED, SUPERSEDED):  # the posted buttons stop working
            calls += [(f"update:{name}", name, m.channel) for name, m in posted.items()]
        elif event == REMINDED:  # those reminded: who the question still names
            current = self.targets(interrupt.assignees)
            calls += [(f"update:{n}", n, m.channel) for n, m in posted.items() if n in current]
        failures: dict[str, str] = {}
        for key, name, channel in calls:
            if only is not None and key not in only:
                continue
            try:
                self._send(event, interrupt, name, channel, posted.get(name), delegation)
            except Exception as exc:
                failures[key] = f"{key} ({channel}): {type(exc).__name__}: {exc}"
        if failures:
            raise Undelivered("; ".join(failures.values()), only=list(failures))

    def _send(
        self,
        event: str,
        interrupt: Interrupt,
        name: str,
        channel: str,
        message: SlackMessage | None,
        delegation: Delegation | None,
    ) -> None:
        """Post the question's message for assignee `name` to `channel`, or update
        `message`, the one posted before."""
        text = fallback_text(interrupt)
        content = blocks(
            event, interrupt, self._link_holder(interrupt, name, delegation), delegation
        )
        if message is not None:
            self.client.chat_update(
                channel=message.channel, ts=message.ts, text=text, blocks=content
            )
            return
        response = self.client.chat_postMessage(channel=channel, text=text, blocks=content)
        SlackMessage.objects.create(
            interrupt=interrupt, assignee=name, channel=response["channel"], ts=response["ts"]
        )

    def _link_holder(
        self, interrupt: Interrupt, name: str, delegation: Delegation | None
    ) -> tuple[bool, Any]:
        """Whether the message for assignee `name` carries approve/reject links, and whose
        they are: a user's own in a direct message (the delegate's, told of a delegated
        question), anyone's who may answer in a channel. A message for someone the
        question no longer names carries none."""
        if interrupt.status != InterruptStatus.PENDING:
            return False, None
        if delegation is not None and name == f"user:{delegation.delegate.get_username()}":
            return True, delegation.delegate.pk
        if name not in self.targets(interrupt.assignees):
            return False, None
        kind, username = parse_assignee(name) if name else ("group", "")
        if kind != "user":
            return True, None
        users = get_user_model()
        user = users.objects.filter(**{users.USERNAME_FIELD: username}).first()
        return True, None if user is None else user.pk
