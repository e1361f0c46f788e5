"""The live stream, `GET invocations/{id}/stream/` (DESIGN 4.5), served in the test's own
process (the WSGI path, polling): what it sends, in what order, to whom; resuming; bad
input; the capacity limit. tests/protocols/test_stream_asgi.py runs it under uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.asking import ask
from tests.factories import ApproverFactory, UserFactory, grant_answer
from workflows import services
from workflows.models import NodeRun, SessionEvent
from workflows.protocols import stream

from .sse import KEEP_ALIVE, Message, messages, own_capacity, parse

__all__ = ["own_capacity"]  # a fixture, used by every test here

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("own_capacity")]


def client(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def chunks(response: Any) -> Iterator[str]:
    for chunk in response.streaming_content:
        yield chunk.decode() if isinstance(chunk, bytes) else chunk


def url(invocation_id: Any) -> str:
    return f"/api/invocations/{invocation_id}/stream/"


@pytest.fixture
def finished():
    """An invocation amy started, which asked her, was answered and completed; sam sees
    every invocation (workflows.view_invocation) but may answer none."""
    amy = ApproverFactory(username="amy")
    sam = grant_answer(UserFactory(username="sam"), "view_invocation")
    interrupt = ask(user=amy, assignees=["user:amy"], payload={"secret": "salary 90k"})
    services.decide(interrupt.pk, {"approved": True}, actor=amy)
    return interrupt.invocation, amy, sam


def test_every_session_event_then_each_node_run_change_in_order_then_the_end(finished):
    invocation, amy, _ = finished

    got = messages(chunks(client(amy).get(url(invocation.pk))))

    events = list(SessionEvent.objects.filter(invocation=invocation).order_by("id"))
    expected = []
    for event in events:
        expected.append(("session", str(event.pk)))
        if event.status:
            expected.append(("node_run", f"{event.pk}.1"))
    assert [(m.event, m.id) for m in got[:-1]] == expected
    assert got[-1].event == "end" and got[-1].id is None
    assert got[-1].data["status"] == "COMPLETED"
    node_runs = [m.data for m in got if m.event == "node_run"]
    assert {"path": "hitl_test_ask@1/question@1", "status": "WAITING"}.items() <= node_runs[
        1
    ].items()


@pytest.mark.parametrize("how", ["header", "query"])
def test_resuming_after_any_id_sends_the_rest_once(finished, how):
    invocation, amy, _ = finished
    api = client(amy)
    whole = messages(chunks(api.get(url(invocation.pk))))
    ids = [m.id for m in whole if m.id]

    for index, last in enumerate(ids):
        if how == "header":
            response = api.get(url(invocation.pk), HTTP_LAST_EVENT_ID=last)
        else:
            response = api.get(url(invocation.pk), {"last_event_id": last})
        rest = messages(chunks(response))
        assert [m.id for m in rest if m.id] == ids[index + 1 :]
        assert rest[-1].event == "end"


def test_a_question_payload_only_for_whom_may_answer_it(finished):
    invocation, amy, sam = finished

    def asked(user: Any) -> dict[str, Any]:
        got = messages(chunks(client(user).get(url(invocation.pk))))
        return next(m.data for m in got if m.event == "session" and m.data["function_calls"])

    call = asked(amy)["function_calls"][0]
    assert call["args"]["payload"] == {"secret": "salary 90k"}
    assert call["question"]["payload"] == {"secret": "salary 90k"}
    # sam sees the invocation but is not an assignee.
    hidden = asked(sam)["function_calls"][0]
    assert hidden["args"] is None
    assert hidden["question"] == {
        "id": call["id"],
        "kind": "input",
        "status": "resolved",
        "answerable": False,
        "waiting_on_others": False,
    }
    assert "salary" not in str(asked(sam))


def test_whoever_may_not_see_the_invocation_gets_404(finished):
    invocation, _, _ = finished
    stranger = UserFactory(username="eve")

    response = client(stranger).get(url(invocation.pk))

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_invocation"
    assert client(stranger).get(url("no-such-id")).status_code == 404
    assert APIClient().get(url(invocation.pk)).status_code in (401, 403)


@pytest.mark.parametrize("bad", ["abc", "-1", "1.2", "12.1.1", "9" * 40, "1e3"])
def test_a_last_event_id_it_never_sent_is_a_named_400(finished, bad):
    invocation, amy, _ = finished

    response = client(amy).get(url(invocation.pk), HTTP_LAST_EVENT_ID=bad)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_last_event_id"
    assert stream.capacity.open == 0


@override_settings(HITL={"STREAM_MAX_CLIENTS": 1, "STREAM_POLL_SECONDS": 0.01})
def test_the_next_stream_over_the_limit_is_refused_with_503_and_a_closed_one_frees_its_place():
    amy = ApproverFactory(username="amy")
    waiting = ask(user=amy, assignees=["user:amy"]).invocation
    api = client(amy)

    first = api.get(url(waiting.pk))
    refused = api.get(url(waiting.pk), HTTP_ACCEPT="text/event-stream")

    assert refused.status_code == 503
    assert refused.json()["error"] == "stream_capacity"
    first.close()  # the server closes the response of a client that left
    assert stream.capacity.open == 0
    again = api.get(url(waiting.pk))
    assert again.status_code == 200
    again.close()


@override_settings(HITL={"STREAM_KEEPALIVE_SECONDS": 0.05, "STREAM_POLL_SECONDS": 0.01})
def test_a_quiet_stream_sends_a_keep_alive_comment():
    amy = ApproverFactory(username="amy")
    waiting = ask(user=amy, assignees=["user:amy"]).invocation
    response = client(amy).get(url(waiting.pk))

    seen: list[Message | str] = []
    for item in parse(chunks(response)):
        seen.append(item)
        if item == KEEP_ALIVE:
            break
    response.close()

    assert isinstance(seen[-2], Message) and seen[-1] == KEEP_ALIVE
    assert stream.capacity.open == 0


def until_keep_alive(items: Iterator[Message | str]) -> list[Message]:
    """The events up to the next keep-alive comment (a read that found nothing new)."""
    got = []
    for item in items:
        if item == KEEP_ALIVE:
            return got
        if isinstance(item, Message):
            got.append(item)
    raise AssertionError("the stream ended")


@override_settings(HITL={"STREAM_KEEPALIVE_SECONDS": 0.05, "STREAM_POLL_SECONDS": 0.01})
def test_a_node_run_start_is_sent_once_per_connection_and_again_on_resuming():
    amy = ApproverFactory(username="amy")
    waiting = ask(user=amy, assignees=["user:amy"]).invocation
    child = NodeRun.objects.get(invocation=waiting, status="WAITING", path__contains="/")
    parent = NodeRun.objects.get(invocation=waiting, path=child.parent_path)
    # What a worker commits when a node starts (a rerun of the question, then its parent).
    NodeRun.objects.filter(pk=child.pk).update(status="RUNNING", attempt=2)
    response = client(amy).get(url(waiting.pk))
    items = parse(chunks(response))

    first = until_keep_alive(items)
    starts = [m for m in first if m.data.get("status") == "RUNNING"]
    assert [(m.event, m.id, m.data["path"], m.data["attempt"]) for m in starts] == [
        ("node_run", None, child.path, 2)
    ]
    assert first[-1] is starts[0]  # after the session events that led to it
    NodeRun.objects.filter(pk=parent.pk).update(status="RUNNING")
    later = until_keep_alive(items) + until_keep_alive(items)
    response.close()
    assert [(m.event, m.data["path"]) for m in later] == [("node_run", parent.path)]

    last = [m.id for m in first if m.id][-1]
    resumed = client(amy).get(url(waiting.pk), HTTP_LAST_EVENT_ID=last)
    again = until_keep_alive(parse(chunks(resumed)))
    resumed.close()
    assert sorted((m.id, m.data["path"], m.data["status"]) for m in again) == [
        (None, parent.path, "RUNNING"),
        (None, child.path, "RUNNING"),
    ]
    assert stream.capacity.open == 0


def test_a_node_run_start_wakes_the_invocation_channel_on_postgresql():
    # A start committed alone (checkpoint_before_run) writes no session event: migration
    # 0019 sends the stream's NOTIFY for it, once it commits.
    import psycopg

    from tests.integration.worker import require_postgres
    from workflows.protocols import wakeup

    require_postgres("NOTIFY is PostgreSQL's")
    amy = ApproverFactory(username="amy")
    waiting = ask(user=amy, assignees=["user:amy"]).invocation
    with psycopg.connect(wakeup.conninfo(), autocommit=True) as listening:
        listening.execute(f"LISTEN {wakeup.CHANNEL}")
        NodeRun.objects.filter(invocation=waiting, path__contains="/").update(status="COMPLETED")
        assert list(listening.notifies(timeout=0.2)) == []  # only a start wakes it
        NodeRun.objects.filter(invocation=waiting, path__contains="/").update(status="RUNNING")
        heard = next(listening.notifies(timeout=10), None)
    assert heard is not None and heard.payload == str(waiting.pk)
