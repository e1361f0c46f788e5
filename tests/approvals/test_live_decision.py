"""The decision page's live feed, `<question>/events/` beside the page (DESIGN 4.5): who may
follow it (whoever may open the page; anyone else the page's 404), what it sends when the
question is answered elsewhere, cancelled or handed over, and that it then ends. Served in
the test's own process (the WSGI path, polling)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import override_settings
from django.urls import reverse

from tests.asking import ask
from tests.factories import ApproverFactory, UserFactory
from tests.protocols.sse import Message, own_capacity, parse
from workflows import services
from workflows.models import Interrupt
from workflows.protocols import stream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_capacity")]

__all__ = ["own_capacity"]  # a fixture, used by every test here


def events_url(interrupt: Any) -> str:
    return reverse("admin:approvals_pendingapproval_events", args=[quote(interrupt.pk)])


OPENED: list[Any] = []


@pytest.fixture(autouse=True)
def close_feeds(own_capacity: stream.Capacity) -> Iterator[None]:
    """Closes each feed a test opened, as the server does when a client leaves (giving
    its place back)."""
    yield
    while OPENED:
        OPENED.pop().close()
    assert own_capacity.open == 0


def follow(client: Any, user: Any, interrupt: Any, **headers: str) -> Iterator[Message]:
    client.force_login(user)
    response = client.get(events_url(interrupt), headers=headers)
    OPENED.append(response)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    chunks = (c.decode() for c in response.streaming_content)
    return (m for m in parse(chunks) if isinstance(m, Message))


def test_someone_who_may_not_open_the_page_learns_nothing(client):
    ApproverFactory(username="alice")
    question = ask(message="Pay the Lisbon invoice?", assignees=["user:alice"])
    for outsider in (
        ApproverFactory(username="bob"),  # may answer questions, not this one
        UserFactory(username="eve", is_staff=True),  # staff, may answer none
    ):
        client.force_login(outsider)
        response = client.get(events_url(question))
        assert response.status_code == 404
        assert b"Lisbon" not in response.content
        assert b"event:" not in response.content
    client.force_login(ApproverFactory(username="carl"))
    assert client.get(events_url(question).replace(question.pk, "nope")).status_code == 404


def test_an_answer_given_elsewhere_is_sent_and_the_feed_ends(client):
    alice = ApproverFactory(username="alice")
    bob = ApproverFactory(username="bob")
    question = ask(message="Approve the offsite?")
    feed = follow(client, alice, question)

    first = next(feed)
    assert first.event == "question"
    assert first.data["status"] == "pending"
    assert first.data["answerable"] is True
    services.decide(question.pk, {"approved": True}, actor=bob)
    changed = next(feed)
    assert changed.data["answerable"] is False
    assert changed.data["resolved_by"] == "bob"
    assert changed.data["message"].startswith("Answered meanwhile by bob, ")
    assert "approved: yes" in changed.data["message"]
    assert changed.id != first.id
    assert [m.event for m in feed] == ["end"]  # and nothing after it


def test_a_cancelled_question_is_sent_and_ends_the_feed(client):
    alice = ApproverFactory(username="alice")
    question = ask(message="Approve the offsite?")
    services.cancel(question.invocation_id)
    sent = list(follow(client, alice, question))
    assert [m.event for m in sent] == ["question", "end"]
    assert sent[0].data["status"] == "cancelled"
    assert sent[0].data["message"] == "Cancelled meanwhile: the invocation was cancelled."


def test_a_question_handed_over_is_no_longer_followed(client):
    alice = ApproverFactory(username="alice")
    ApproverFactory(username="bob")
    question = ask(message="Approve the offsite?", assignees=["user:alice"])
    feed = follow(client, alice, question)
    assert next(feed).data["answerable"] is True
    services.reassign(question.pk, ["user:bob"], actor=alice)
    handed = next(feed)
    assert handed.data["answerable"] is False
    assert handed.data["message"] == "Handed over meanwhile to user:bob: no longer yours to answer."
    assert [m.event for m in feed] == ["end"]


def test_resuming_at_the_state_sent_sends_only_what_changes(client):
    alice = ApproverFactory(username="alice")
    question = ask(message="Approve the offsite?")
    seen = next(follow(client, alice, question))
    services.cancel(question.invocation_id)
    resumed = list(follow(client, alice, question, **{"Last-Event-ID": seen.id}))
    assert [m.event for m in resumed] == ["question", "end"]
    assert resumed[0].data["status"] == "cancelled"
    again = list(follow(client, alice, question, **{"Last-Event-ID": resumed[0].id}))
    assert [m.event for m in again] == ["end"]  # the state it had: not sent twice


def test_an_expired_question_is_sent_and_ends_the_feed(client):
    alice = ApproverFactory(username="alice")
    question = ask(timeout=timedelta(hours=1), on_timeout={"approved": False})
    feed = follow(client, alice, question)
    assert next(feed).data["answerable"] is True
    Interrupt.objects.update(deadline=question.created_at - timedelta(seconds=1))
    assert services.expire_overdue_interrupts() == 1
    expired = next(feed)
    assert expired.data["status"] == "expired"
    assert expired.data["message"] == "Expired meanwhile: its timeout policy applied."
    assert [m.event for m in feed] == ["end"]


@override_settings(HITL={"STREAM_MAX_CLIENTS": 1})
def test_a_feed_over_the_limit_is_refused_with_503_and_a_closed_one_frees_its_place(client):
    client.force_login(ApproverFactory(username="alice"))
    question = ask(message="Approve the offsite?")
    first = client.get(events_url(question))
    refused = client.get(events_url(question))
    assert refused.status_code == 503
    assert b"live streams" in refused.content
    first.close()
    assert stream.capacity.open == 0
