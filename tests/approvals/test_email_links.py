"""The e-mail notifier: e-mail to assignees when an interrupt opens, and the signed
approve/reject links: a GET only shows a confirmation page, the POST decides, once, for the
user it was sent to."""

import re
import smtplib
import uuid
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group
from django.core import mail, signing
from django.core.mail.backends import locmem
from django.core.mail.backends.base import BaseEmailBackend
from django.test import override_settings

from approvals.links import DecisionLink, make_token, read_token
from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory
from workflows import services
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Interrupt, Invocation, NotificationAttempt

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL_ON = {"EMAIL_NOTIFICATIONS": True, "EMAIL_BASE_URL": "https://ops.example.com"}


def link_url(interrupt, user, decision: str) -> str:
    return f"/approvals/email/{make_token(DecisionLink(interrupt.pk, user.pk, decision))}/"


def test_no_mail_unless_switched_on():
    ApproverFactory(username="alice", email="alice@example.com")
    ask(assignees=["user:alice"])
    assert mail.outbox == []


@override_settings(HITL=EMAIL_ON)
def test_assignees_get_mail_with_approve_and_reject_links():
    ApproverFactory(username="alice", email="alice@example.com")
    bob = ApproverFactory(username="bob", email="bob@example.com")
    ApproverFactory(username="nomail", email="")
    starter = ApproverFactory(username="starter", email="starter@example.com")
    Group.objects.create(name="finance").user_set.add(bob, starter)
    interrupt = ask(
        user=starter,
        message="Approve the offsite?",
        assignees=["user:alice", "user:nomail", "group:finance"],
        four_eyes=True,
    )
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.com", "bob@example.com"]
    message = next(m for m in mail.outbox if m.to == ["alice@example.com"])
    assert message.subject == "Decision needed: Approve the offsite?"
    links = re.findall(r"https://ops\.example\.com(/approvals/email/[^/\s]+/)", message.body)
    assert len(links) == 2
    assert "/admin/approvals/pendingapproval/" in message.body
    decisions = sorted(read_token(link.split("/")[3]).decision for link in links)
    assert decisions == ["approve", "reject"]
    assert read_token(links[0].split("/")[3]).interrupt_id == interrupt.pk


@override_settings(HITL=EMAIL_ON)
def test_a_question_with_more_to_fill_in_gets_only_the_inbox_link():
    ApproverFactory(username="alice", email="alice@example.com")
    ask(
        assignees=["user:alice"],
        response_schema={**APPROVAL, "required": ["approved", "comment"]},
    )
    (message,) = mail.outbox
    assert "/approvals/email/" not in message.body
    assert "/admin/approvals/pendingapproval/" in message.body


@override_settings(HITL=EMAIL_ON, EMAIL_BACKEND="tests.approvals.test_email_links.Broken")
def test_a_mail_failure_never_breaks_the_workflow():
    ApproverFactory(username="alice", email="alice@example.com")
    interrupt = ask(assignees=["user:alice"])
    assert Invocation.objects.get(pk=interrupt.invocation_id).status == NodeStatus.WAITING
    errors = NotificationAttempt.objects.filter(interrupt=interrupt).values_list("error", flat=True)
    assert errors and all("smtp down" in error for error in errors)


class Broken(BaseEmailBackend):
    def open(self):
        raise ConnectionRefusedError("smtp down")


class RefusesBob(locmem.EmailBackend):
    """Delivers like the test backend, except to bob, whose mail server refuses."""

    def send_messages(self, messages):
        if any("bob@example.com" in m.to for m in messages):
            raise smtplib.SMTPRecipientsRefused({"bob@example.com": (550, b"no such user")})
        return super().send_messages(messages)


@override_settings(HITL=EMAIL_ON, EMAIL_BACKEND="tests.approvals.test_email_links.RefusesBob")
def test_a_multi_line_question_reaches_everyone_but_the_one_refused():
    for name in ("alice", "bob", "carol"):
        ApproverFactory(username=name, email=f"{name}@example.com")
    ask(
        message="Approve the offsite?\nBudget: 4,200 EUR\r\nVenue: Lisbon, " + "x" * 100,
        assignees=["user:alice", "user:bob", "user:carol"],
    )
    assert sorted(m.to[0] for m in mail.outbox) == ["alice@example.com", "carol@example.com"]
    subject = mail.outbox[0].subject
    assert subject.startswith("Decision needed: Approve the offsite? Budget: 4,200 EUR Venue:")
    assert "\n" not in subject and "\r" not in subject
    assert len(subject) <= len("Decision needed: ") + 70 and subject.endswith("…")
    assert "Budget: 4,200 EUR" in mail.outbox[0].body  # the body keeps the lines
    # Bob's failure is recorded (and retried, for him alone: the others got one mail each).
    failed = NotificationAttempt.objects.filter(succeeded=False).values_list("error", flat=True)
    assert failed and all(e.startswith("bob@example.com: SMTPRecipientsRefused") for e in failed)


def test_get_confirms_post_decides_once(client):
    alice = ApproverFactory(username="alice")
    interrupt = ask(assignees=["user:alice"])
    url = link_url(interrupt, alice, "reject")
    client.force_login(alice)
    page = client.get(url)
    assert page.status_code == 200
    assert b"Confirm: reject" in page.content
    assert not Decision.objects.exists(), "a GET never decides"
    done = client.post(url, {"comment": "not this quarter"})
    assert b"Recorded: you rejected" in done.content
    assert b"Open the approvals inbox" in done.content
    assert b"Log out" in done.content  # the admin's header: who is logged in
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.RESOLVED
    assert Invocation.objects.get(pk=interrupt.invocation_id).output == {
        "approved": False,
        "comment": "not this quarter",
    }
    again = client.post(url)
    assert again.status_code == 409 and b"resolved" in again.content
    assert Decision.objects.count() == 1


def test_a_link_works_only_for_its_user_when_logged_in(client):
    alice = ApproverFactory(username="alice")
    mallory = ApproverFactory(username="mallory")
    interrupt = ask()
    url = link_url(interrupt, alice, "approve")
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    client.force_login(mallory)
    refused = client.post(url)
    assert refused.status_code == 403
    assert "sent to someone else, and you are logged in as mallory" in refused.content.decode()
    assert b"Log out" in refused.content
    assert not Decision.objects.exists()


def test_a_quorum_link_counts_one_decision_and_refuses_a_second(client):
    alice = ApproverFactory(username="alice")
    interrupt = ask(quorum=2)
    client.force_login(alice)
    url = link_url(interrupt, alice, "approve")
    assert b"Recorded" in client.post(url).content
    again = client.post(url)
    assert again.status_code == 409 and b"one decision per person" in again.content
    assert Interrupt.objects.get(pk=interrupt.pk).status == InterruptStatus.PENDING


def test_tampered_and_expired_links_decide_nothing(client):
    alice = ApproverFactory(username="alice")
    interrupt = ask()
    client.force_login(alice)
    token = make_token(DecisionLink(interrupt.pk, alice.pk, "approve"))
    assert client.get(f"/approvals/email/{token[:-2]}xx/").status_code == 400
    forged = signing.TimestampSigner(salt="elsewhere").sign_object(
        {"i": interrupt.pk, "u": alice.pk, "d": "approve"}
    )
    assert client.post(f"/approvals/email/{forged}/").status_code == 400
    with override_settings(HITL={"EMAIL_LINK_MAX_AGE": -1}):
        expired = client.post(f"/approvals/email/{token}/")
    assert expired.status_code == 410 and b"expired" in expired.content
    assert not Decision.objects.exists()


def test_a_link_stops_showing_the_question_once_reassigned_away(client):
    alice = ApproverFactory(username="alice")
    ApproverFactory(username="bob")
    interrupt = ask(
        message="Approve the Initech contract?",
        payload={"value_eur": 120000},
        assignees=["user:alice"],
    )
    url = link_url(interrupt, alice, "approve")
    client.force_login(alice)
    assert b"Approve the Initech contract?" in client.get(url).content
    services.reassign(interrupt.pk, ["user:bob"], actor=alice)
    for response in (client.get(url), client.post(url)):
        assert response.status_code == 403
        page = response.content.decode()
        assert "You may not answer this question now" in page
        assert "alice is not among the assignees (user:bob)" in page
        assert "Initech" not in page and "120000" not in page
    assert not Decision.objects.exists()


def test_a_link_for_a_user_whose_key_is_a_uuid():
    key = uuid.uuid4()
    person = SimpleNamespace(pk=key)
    token = make_token(DecisionLink("q-1", person.pk, "approve"))
    link = read_token(token)
    assert (link.interrupt_id, link.decision) == ("q-1", "approve")
    assert link.is_for(person)
    assert link.is_for(SimpleNamespace(pk=uuid.UUID(str(key))))
    assert not link.is_for(SimpleNamespace(pk=uuid.uuid4()))
    # A whole-number key compares the same way, as text.
    assert read_token(make_token(DecisionLink("q-1", 7, "reject"))).is_for(SimpleNamespace(pk=7))
    assert not read_token(make_token(DecisionLink("q-1", 7, "reject"))).is_for(
        SimpleNamespace(pk=17)
    )
