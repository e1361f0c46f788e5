"""End to end: an external client with a token drives a real `celery worker` process on
PostgreSQL through the API, and a webhook receiver on loopback verifies every signature
and sees each event once."""

import pytest
from django.db.models import Count

from tests.integration.worker import (
    QUEUE,
    celery_broker,
    celery_worker,
    require_postgres,
    wait_for,
)
from workflows.models import WebhookDelivery, WebhookEndpoint

from .conftest import user_with
from .receiver import webhook_receiver

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

__all__ = ["celery_broker"]  # the fixture, imported for this module


@pytest.fixture
def postgres(transactional_db):
    require_postgres("the worker process shares the test database")


def test_client_starts_answers_one_of_two_then_the_other_and_reads_the_output(
    postgres, celery_broker, client_for, monkeypatch
):
    # Webhook deliveries the worker enqueues go to the queue it consumes.
    monkeypatch.setenv("CELERY_TASK_DEFAULT_QUEUE", QUEUE)
    moderator = user_with(
        "workflows.add_invocation", "workflows.answer_interrupt", groups=("moderators",)
    )
    client = client_for(moderator)
    secret = WebhookEndpoint().secret
    with webhook_receiver(secret) as receiver, celery_worker(celery_broker):
        WebhookEndpoint.objects.create(url=receiver.url, secret=secret)
        started = client.post(
            "/api/invocations/",
            {"workflow": "test_moderation", "input": {"posts": ["kind words", "spam"]}},
            format="json",
            HTTP_IDEMPOTENCY_KEY="e2e-start",
        )
        assert started.status_code == 202, started.json()
        invocation_id = started.json()["id"]
        detail_url = f"/api/invocations/{invocation_id}/"

        def inbox():
            rows = client.get(f"/api/interrupts/?status=pending&invocation={invocation_id}")
            results = rows.json()["results"]
            return sorted(results, key=lambda row: row["message"]) if len(results) == 2 else None

        first, second = wait_for(inbox, what="two pending questions in the inbox")
        assert first["message"].startswith("Publish post 1?")
        question = client.get(f"/api/interrupts/{first['id']}/").json()
        assert question["response_schema"]["required"] == ["decision"]

        answered = client.post(
            "/api/function-responses/",
            {"function_responses": [{"id": first["id"], "response": {"decision": "publish"}}]},
            format="json",
        )
        assert answered.status_code == 202, answered.json()

        # The answered item completes while the worker's run is still RUNNING; the run
        # ends, WAITING again for the other item, a moment later: wait for that state.
        def partial():
            detail = client.get(detail_url).json()
            runs = {run["path"]: run["status"] for run in detail["node_runs"]}
            done = runs.get(first["path"]) == "COMPLETED" and detail["status"] == "WAITING"
            return detail if done else None

        detail = wait_for(partial, what="the answered item to resume and the run to wait again")
        runs = {run["path"]: run["status"] for run in detail["node_runs"]}
        assert runs[second["path"]] == "WAITING"
        assert detail["status"] == "WAITING"
        assert [row["id"] for row in detail["open_interrupts"]] == [second["id"]]

        decided = client.post(
            f"/api/interrupts/{second['id']}/decisions/",
            {"response": {"decision": "remove", "reason": "spam"}, "comment": "spam"},
            format="json",
        )
        assert decided.status_code == 202, decided.json()

        def finished():
            detail = client.get(detail_url).json()
            return detail if detail["status"] == "COMPLETED" else None

        assert wait_for(finished, what="completion")["output"] == {
            "published": [1],
            "removed": [2],
        }
        expected = sorted(
            ["interrupt.opened"] * 2
            + ["interrupt.resolved"] * 2
            + ["decision.recorded", "invocation.finished"]
        )
        wait_for(lambda: sorted(receiver.events()) == expected, what=f"webhooks {expected}")
        wait_for(
            lambda: not WebhookDelivery.objects.exclude(status="delivered").exists(),
            what="every delivery to be settled",
        )
    assert receiver.bad_signatures == []
    assert sorted(receiver.events()) == expected  # nothing arrived twice
    ids = [received.headers["webhook-id"] for received in receiver.received]
    assert len(set(ids)) == len(ids)
    attempts = WebhookDelivery.objects.aggregate(n=Count("attempt_log"))["n"]
    assert attempts == len(expected)
