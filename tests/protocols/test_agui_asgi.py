"""An AG-UI run under uvicorn on PostgreSQL with a real worker: the run's stream follows
the worker's commits (woken by NOTIFY) until the invocation stops on its question, and,
after a resume, until it completes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from tests.integration.worker import celery_worker, require_postgres

from .server import Server, asgi_server

pytestmark = [pytest.mark.postgres, pytest.mark.broker, pytest.mark.django_db(transaction=True)]

QUIET = 600  # keep-alive period: far longer than the test


def run(server: Server, token: str, thread: str, **fields: Any) -> list[dict[str, Any]]:
    body = {"threadId": thread, "runId": str(uuid.uuid4()), "state": {}, "messages": []}
    body.update({"tools": [], "context": [], "forwardedProps": {}, **fields})
    connection = server.connection(timeout=60)
    headers = {
        "Authorization": f"Token {token}",
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
    }
    connection.request("POST", f"/api/agui/{WORKFLOW}/", json.dumps(body), headers)
    response = connection.getresponse()
    assert response.status == 200
    text = response.read().decode()  # the run's stream ends when the invocation stops
    connection.close()
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


def test_a_run_follows_the_worker_to_its_question_and_after_the_resume_to_the_end(
    celery_broker,
):
    require_postgres("a worker and uvicorn run in processes of their own")
    amy = grant_answer(ApproverFactory(username="amy"), "answer_interrupt", "add_invocation")
    token = Token.objects.create(user=amy).key
    thread = str(uuid.uuid4())
    worker = celery_worker(celery_broker, settings="tests.protocols.server_settings")
    with worker, asgi_server(celery_broker, keepalive_seconds=QUIET) as server:
        asked = run(
            server, token, thread, forwardedProps={"request": {"response_schema": APPROVAL}}
        )
        assert asked[-1]["type"] == "RUN_FINISHED", asked
        (question,) = asked[-1]["outcome"]["interrupts"]
        resume = [
            {"interruptId": question["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        done = run(server, token, thread, resume=resume)
    assert done[-1]["type"] == "RUN_FINISHED", done
    assert done[-1]["result"] == {"approved": True}
    finished = [e["stepName"] for e in done if e["type"] == "STEP_FINISHED"]
    assert "hitl_test_ask@1/answered@1" in finished
