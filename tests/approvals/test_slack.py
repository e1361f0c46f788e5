"""The Slack notifier, against a fake Slack Web API in this process (never the real one):
the question posted as Block Kit to each mapped user or channel with the e-mail's signed
links, updated when reminded, escalated or decided, and one failing target retried alone."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Group
from django.test import override_settings
from django.utils import timezone

from approvals.links import read_token
from approvals.models import SlackMessage
from tests.asking import ask
from tests.factories import ApproverFactory
from workflows import services, signals
from workflows.engine.status import InterruptStatus
from workflows.models import Decision, Delegation, Interrupt, NotificationAttempt

pytestmark = pytest.mark.django_db(transaction=True)

SLACK_NOTIFIER = "approvals.notifiers.slack.SlackNotifier"
USERS = {"user:ada": "U123", "group:finance": "C456", "group:directors": "C789"}


class FakeSlack:
    """Records each Web API call; answers like Slack (a direct message to user U… lands in
    channel D…), or with an error for the channels in `failing`."""

    def __init__(self) -> None:
        self.calls: list[SimpleNamespace] = []
        self.failing: set[str] = set()

    def answer(self, method: str, body: dict) -> dict:
        channel = body.get("channel", "")
        if channel in self.failing:
            return {"ok": False, "error": "channel_not_found"}
        if method == "chat.update":
            return {"ok": True, "channel": channel, "ts": body["ts"]}
        return {
            "ok": True,
            "channel": "D" + channel[1:] if channel.startswith("U") else channel,
            "ts": f"1700000000.{len(self.calls):06d}",
        }

    def made(self, method: str) -> list[SimpleNamespace]:
        return [call for call in self.calls if call.method == method]


@pytest.fixture
def slack():
    fake = FakeSlack()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            method = self.path.rsplit("/", 1)[-1]
            call = SimpleNamespace(method=method, body=body, auth=self.headers["Authorization"])
            fake.calls.append(call)
            data = json.dumps(fake.answer(method, body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings = {
        "NOTIFIERS": [SLACK_NOTIFIER],
        "NOTIFY_MAX_ATTEMPTS": 3,
        "EMAIL_BASE_URL": "https://ops.example.com",
        "SLACK": {
            "TOKEN": "xoxb-test",
            "CHANNEL": "C000",
            "USERS": USERS,
            "BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/api/",
        },
    }
    with override_settings(HITL=settings):
        yield fake
    server.shutdown()
    server.server_close()
    thread.join()


def buttons(call: SimpleNamespace) -> dict[str, str]:
    """The message's link buttons, by action: approve, reject, open."""
    (actions,) = [block for block in call.body["blocks"] if block["type"] == "actions"]
    return {button["action_id"]: button["url"] for button in actions["elements"]}


def facts(call: SimpleNamespace) -> str:
    (context,) = [block for block in call.body["blocks"] if block["type"] == "context"]
    return " | ".join(element["text"] for element in context["elements"])


def section(call: SimpleNamespace) -> str:
    return call.body["blocks"][0]["text"]["text"]


def path_of(url: str) -> str:
    return urlsplit(url).path


def test_a_question_is_posted_to_each_mapped_assignee_with_its_links(slack):
    ada = ApproverFactory(username="ada")
    interrupt = ask(
        message="Refund 120 EUR to <Initech> & co?",
        assignees=["user:ada", "group:finance"],
        priority="high",
    )
    posts = slack.made("chat.postMessage")
    assert sorted(call.body["channel"] for call in posts) == ["C456", "U123"]
    assert all(call.auth == "Bearer xoxb-test" for call in posts)
    direct = next(call for call in posts if call.body["channel"] == "U123")
    assert direct.body["text"] == "Decision needed: Refund 120 EUR to &lt;Initech&gt; &amp; co?"
    assert section(direct) == (
        "*Decision needed* · hitl_test_ask\nRefund 120 EUR to &lt;Initech&gt; &amp; co?"
    )
    assert "Priority: *high*" in facts(direct)
    assert "For: user:ada, group:finance" in facts(direct)
    links = buttons(direct)
    assert list(links) == ["approve", "reject", "open"]
    page = f"https://ops.example.com/admin/approvals/pendingapproval/{interrupt.pk}/change/"
    assert links["open"] == page
    approve = read_token(path_of(links["approve"]).split("/")[3])
    assert (approve.interrupt_id, approve.decision, str(approve.user_id)) == (
        interrupt.pk,
        "approve",
        str(ada.pk),
    )
    in_channel = next(call for call in posts if call.body["channel"] == "C456")
    assert read_token(path_of(buttons(in_channel)["reject"]).split("/")[3]).user_id is None
    stored = SlackMessage.objects.filter(interrupt=interrupt).order_by("assignee")
    assert [(m.assignee, m.channel) for m in stored] == [
        ("group:finance", "C456"),
        ("user:ada", "D123"),
    ]
    attempt = NotificationAttempt.objects.get(interrupt=interrupt)
    assert (attempt.notifier, attempt.event, attempt.succeeded) == (SLACK_NOTIFIER, "opened", True)


def test_markup_in_a_question_reaches_slack_as_text_in_every_field(slack):
    message = "<!channel> <https://evil.example|Approve> & <@U999>"
    ask(message=message, assignees=["user:ada"], priority="high")
    (post,) = slack.made("chat.postMessage")
    shown = "&lt;!channel&gt; &lt;https://evil.example|Approve&gt; &amp; &lt;@U999&gt;"
    assert post.body["text"] == f"Decision needed: {shown}"
    assert section(post).endswith(f"\n{shown}")
    mrkdwn = [post.body["text"], section(post), facts(post)]
    assert not any(markup in text for text in mrkdwn for markup in ("<!", "<http", "<@"))


def test_a_long_question_is_cut_between_escapes_not_inside_one(slack):
    ask(message="&" * 3000, assignees=["user:ada"])
    (post,) = slack.made("chat.postMessage")
    text = section(post)
    assert len(text) <= 3000 and text.endswith("&amp;")


def test_the_due_date_is_shown_in_each_readers_time_zone(slack):
    interrupt = ask(assignees=["user:ada"])
    due = timezone.now().replace(microsecond=0) + timedelta(hours=8)
    Interrupt.objects.filter(pk=interrupt.pk).update(due_at=due)
    SlackMessage.objects.all().delete()  # else it is not posted again
    slack.calls.clear()
    signals.interrupt_opened.send(sender=None, interrupt_id=interrupt.pk)
    (post,) = slack.made("chat.postMessage")
    assert f"Due: <!date^{int(due.timestamp())}^{{date_short_pretty}} {{time}}|" in facts(post)


def test_a_question_for_no_mapped_assignee_goes_to_the_channel(slack):
    ask(assignees=["user:carol"])
    (post,) = slack.made("chat.postMessage")
    assert post.body["channel"] == "C000"
    assert SlackMessage.objects.get().assignee == ""


def test_a_question_that_needs_more_than_yes_or_no_gets_only_the_open_link(slack):
    from tests.asking import APPROVAL

    ask(assignees=["user:ada"], response_schema={**APPROVAL, "required": ["approved", "comment"]})
    (post,) = slack.made("chat.postMessage")
    assert list(buttons(post)) == ["open"]


def test_the_messages_are_updated_when_the_question_is_decided(slack):
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada", "group:finance"])
    stored = {m.channel: m.ts for m in SlackMessage.objects.all()}
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    updates = slack.made("chat.update")
    assert {call.body["channel"]: call.body["ts"] for call in updates} == stored
    for call in updates:
        assert section(call).startswith("*Decided* · hitl_test_ask")
        assert "By: ada" in facts(call)
        assert list(buttons(call)) == ["open"], "no approve/reject links once decided"
    assert len(slack.made("chat.postMessage")) == 2, "updated, not posted again"


def test_a_reminder_updates_the_messages_and_an_escalation_moves_the_links(slack):
    interrupt = ask(assignees=["group:finance"])
    ladder = [
        {"after": 60, "remind": True, "assignees": None},
        {"after": 120, "remind": False, "assignees": ["group:directors"]},
    ]
    Interrupt.objects.filter(pk=interrupt.pk).update(escalation=ladder)
    (finance,) = SlackMessage.objects.all()
    signals.interrupt_escalated.send_robust(sender=None, interrupt_id=interrupt.pk, step=0)
    (reminded,) = slack.made("chat.update")
    assert (reminded.body["channel"], reminded.body["ts"]) == (finance.channel, finance.ts)
    assert "Reminder: this still waits for a decision" in facts(reminded)
    assert list(buttons(reminded)) == ["approve", "reject", "open"]
    slack.calls.clear()
    Interrupt.objects.filter(pk=interrupt.pk).update(assignees=["group:directors"])
    signals.interrupt_escalated.send_robust(sender=None, interrupt_id=interrupt.pk, step=1)
    (posted,) = slack.made("chat.postMessage")
    assert posted.body["channel"] == "C789"
    assert list(buttons(posted)) == ["approve", "reject", "open"]
    (moved,) = slack.made("chat.update")
    assert moved.body["channel"] == "C456"
    assert "Escalated" in facts(moved) and list(buttons(moved)) == ["open"]


def test_the_delegate_gets_a_direct_message_with_links_of_their_own(slack):
    carol = ApproverFactory(username="carol")
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:carol"])
    now = timezone.now()
    delegation = Delegation.objects.create(
        delegator=carol, delegate=ada, starts_at=now, ends_at=now + timedelta(days=1)
    )
    slack.calls.clear()
    signals.delegation_changed.send_robust(
        sender=None, delegation_id=delegation.pk, action="delegation.created"
    )
    (post,) = slack.made("chat.postMessage")
    assert post.body["channel"] == "U123"
    assert "For carol, who is away until <!date^" in facts(post)
    link = read_token(path_of(buttons(post)["approve"]).split("/")[3])
    assert (link.interrupt_id, str(link.user_id)) == (interrupt.pk, str(ada.pk))


def test_a_failing_target_is_retried_alone_and_recorded(slack):
    slack.failing.add("C456")
    interrupt = ask(assignees=["user:ada", "group:finance"])
    posts = [call.body["channel"] for call in slack.made("chat.postMessage")]
    assert sorted(posts) == ["C456", "C456", "C456", "U123"], "U123 once, C456 each attempt"
    attempts = NotificationAttempt.objects.filter(interrupt=interrupt).order_by("attempt")
    assert [(a.attempt, a.succeeded) for a in attempts] == [(1, False), (2, False), (3, False)]
    assert all("post:group:finance (C456)" in a.error for a in attempts)
    assert all("channel_not_found" in a.error for a in attempts)
    assert [m.channel for m in SlackMessage.objects.all()] == ["D123"]
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.PENDING


def test_the_slack_links_decide_once_and_expire(slack, client):
    bob = ApproverFactory(username="bob")
    mallory = ApproverFactory(username="mallory")
    Group.objects.create(name="finance").user_set.add(bob)
    interrupt = ask(assignees=["group:finance"])
    (post,) = slack.made("chat.postMessage")
    approve = path_of(buttons(post)["approve"])
    client.force_login(mallory)
    assert client.post(approve).status_code == 403, "a channel's link: still the answer rule"
    client.force_login(bob)
    with override_settings(HITL={"EMAIL_LINK_MAX_AGE": -1}):
        assert client.post(approve).status_code == 410
    assert not Decision.objects.exists()
    assert b"Confirm: approve" in client.get(approve).content
    assert b"Recorded" in client.post(approve).content
    assert client.post(approve).status_code == 409
    assert Decision.objects.get().actor == bob
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.RESOLVED


def test_without_a_token_the_slack_notifier_is_off(slack):
    with override_settings(HITL={"NOTIFIERS": [SLACK_NOTIFIER], "SLACK": {"CHANNEL": "C000"}}):
        ask(assignees=["user:ada"])
    assert slack.calls == [] and not NotificationAttempt.objects.exists()


def test_a_failing_update_is_retried_alone(slack):
    ada = ApproverFactory(username="ada")
    interrupt = ask(assignees=["user:ada", "group:finance"])
    slack.failing.add("C456")
    services.decide(interrupt.pk, {"approved": True}, actor=ada)
    updated = sorted(call.body["channel"] for call in slack.made("chat.update"))
    assert updated == ["C456", "C456", "C456", "D123"]
    failed = NotificationAttempt.objects.filter(event="decided", succeeded=False)
    assert failed.count() == 3 and all("update:group:finance" in a.error for a in failed)
