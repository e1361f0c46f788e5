"""The live stream under a real ASGI server (uvicorn) on PostgreSQL: a real worker's commit
wakes it through LISTEN/NOTIFY (the keep-alive period is far longer than the test takes,
so no re-read could have found it); a client that leaves ends its stream, which gives back
its place and the listening connection."""

from __future__ import annotations

import time
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory
from tests.integration.worker import celery_worker, require_postgres, wait_for
from workflows import services
from workflows.models import Interrupt

from .server import asgi_server, open_stream
from .sse import KEEP_ALIVE, Message, parse

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

QUESTION = "hitl_test_ask@1/question@1"
QUIET = 600  # seconds between keep-alives: far longer than any of these tests


def start(user: Any) -> Any:
    request = {"message": "Approve?", "response_schema": APPROVAL, "assignees": ["user:amy"]}
    return services.start(WORKFLOW, {"request": request}, user=user)


def listening() -> int:
    """The server's LISTEN connections on the test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN hitl_stream%%' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.fixture
def amy():
    require_postgres("the stream is woken by LISTEN/NOTIFY")
    user = ApproverFactory(username="amy")
    return user, Token.objects.create(user=user).key


@pytest.mark.broker
def test_a_worker_commit_reaches_an_open_stream_through_notify(amy, celery_broker):
    user, token = amy
    worker = celery_worker(celery_broker, settings="tests.protocols.server_settings")
    with worker, asgi_server(celery_broker, keepalive_seconds=QUIET) as server:
        invocation = start(user)
        with open_stream(server, invocation.pk, token) as stream:
            assert stream.status == 200
            seen: list[Message] = []
            answered_at = None
            for item in parse(stream.chunks()):
                if not isinstance(item, Message):
                    continue
                seen.append(item)
                waiting = item.event == "node_run" and item.data["status"] == "WAITING"
                if waiting and item.data["path"] == QUESTION:
                    interrupt = Interrupt.objects.get(invocation=invocation)
                    answered_at = time.monotonic()
                    services.decide(interrupt.pk, {"approved": True}, actor=user)
                if item.event == "end":
                    break
    assert answered_at is not None and time.monotonic() - answered_at < QUIET / 10
    assert seen[-1].data["status"] == "COMPLETED"
    (asked,) = [c for m in seen if m.event == "session" for c in m.data["function_calls"]]
    assert asked["question"]["answerable"] is True  # read in a thread: the ORM, not the loop
    ids = [m.id for m in seen if m.id]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("."))))
    assert len(ids) == len(set(ids))


def test_a_client_that_leaves_ends_its_stream(amy):
    user, token = amy
    with asgi_server(keepalive_seconds=QUIET, max_clients=1) as server:
        invocation = start(user)  # eager here: it waits on amy at once
        with open_stream(server, invocation.pk, token) as stream:
            first = next(m for m in parse(stream.chunks()) if isinstance(m, Message))
            assert first.event == "session"
            assert listening() == 1
            with open_stream(server, invocation.pk, token) as refused:
                assert refused.status == 503
        # Gone: its generator ended, so the listening connection closed and its place is free.
        wait_for(lambda: listening() == 0, timeout=10)
        with open_stream(server, invocation.pk, token) as again:
            assert again.status == 200


def test_open_streams_hold_no_database_connection_nor_thread_each(amy):
    user, token = amy
    invocation = start(user)
    with asgi_server(keepalive_seconds=QUIET) as server, ExitStack() as streams:
        for _ in range(STREAMS):
            stream = streams.enter_context(open_stream(server, invocation.pk, token))
            next(m for m in parse(stream.chunks()) if isinstance(m, Message))
        # One listening connection, and the shared pool's (a few threads), not one each.
        assert server_connections() < STREAMS / 2
        assert server_threads(server.process.pid) < STREAMS / 2


STREAMS = 20


def server_threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])


def server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_a_quiet_stream_sends_keep_alive_comments(amy):
    user, token = amy
    invocation = start(user)
    with (
        asgi_server(keepalive_seconds=0.2) as server,
        open_stream(server, invocation.pk, token) as stream,
    ):
        items = parse(stream.chunks())
        comments = list(islice((i for i in items if not isinstance(i, Message)), 2))
    assert comments == [KEEP_ALIVE, KEEP_ALIVE]
