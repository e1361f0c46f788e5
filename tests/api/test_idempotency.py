"""Idempotency-Key: a repeat gets the stored response and does nothing twice; the same key
with another request is 422; rejected requests keep no key; keys expire."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from workflows import services
from workflows.models import Decision, IdempotencyKey, Invocation
from workflows.tasks import purge_idempotency_keys

from .conftest import error_of, pending, snapshot, start, user_with

pytestmark = pytest.mark.django_db(transaction=True)

START = {"workflow": "api_approval", "input": {"amount": 1}}


def post(client, url, body, key):
    return client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_repeated_start_returns_the_stored_response_and_starts_once(api):
    first = post(api, "/api/invocations/", START, "start-1")
    again = post(api, "/api/invocations/", START, "start-1")
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Invocation.objects.count() == 1


def test_a_repeated_decision_is_recorded_once(api, operator):
    question = pending(start(user=operator))[0]
    url = f"/api/interrupts/{question.id}/decisions/"
    body = {"response": {"approved": True}}
    assert post(api, url, body, "decide-1").status_code == 202
    replay = post(api, url, body, "decide-1")
    assert replay.status_code == 202  # without the key this would be 409 already_decided
    assert Decision.objects.count() == 1


def test_the_same_key_with_another_body_or_path_is_422_and_changes_nothing(api):
    assert post(api, "/api/invocations/", START, "k").status_code == 202
    before = snapshot()
    other_body = post(api, "/api/invocations/", {"workflow": "api_pair"}, "k")
    assert error_of(other_body)[:2] == (422, "idempotency_key_reused")
    other_path = post(api, "/api/function-responses/", START, "k")
    assert error_of(other_path)[:2] == (422, "idempotency_key_reused")
    assert snapshot() == before


def test_keys_belong_to_their_user(api, client_for):
    other = client_for(user_with("workflows.add_invocation"))
    assert post(api, "/api/invocations/", START, "shared").status_code == 202
    assert post(other, "/api/invocations/", START, "shared").status_code == 202
    assert Invocation.objects.count() == 2


def test_a_rejected_request_keeps_no_key_and_can_be_retried(api):
    before = snapshot()
    assert post(api, "/api/invocations/", {"workflow": "nope"}, "retry-me").status_code == 400
    assert snapshot() == before
    assert post(api, "/api/invocations/", START, "retry-me").status_code == 202


def test_an_expired_key_runs_the_request_again_and_start_still_dedupes(api, settings):
    """Past the TTL the API no longer replays; services.start still knows the key (scoped
    to the caller), so the late retry gets the same invocation, not a second one."""
    first = post(api, "/api/invocations/", START, "old")
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(days=2))
    settings.HITL = {**settings.HITL, "IDEMPOTENCY_KEY_TTL": 3600}
    again = post(api, "/api/invocations/", START, "old")
    assert again.status_code == 202
    assert "Idempotent-Replayed" not in again
    assert again.json()["id"] == first.json()["id"]
    assert Invocation.objects.count() == 1


def test_the_purge_removes_expired_keys_only(api, settings):
    settings.HITL = {**settings.HITL, "IDEMPOTENCY_KEY_TTL": 3600}
    post(api, "/api/invocations/", START, "fresh")
    post(api, "/api/invocations/", {"workflow": "api_pair"}, "stale")
    IdempotencyKey.objects.filter(key="stale").update(created_at=timezone.now() - timedelta(days=2))
    assert purge_idempotency_keys() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]


def test_an_overlong_key_is_a_400_naming_the_header(api):
    before = snapshot()
    response = post(api, "/api/invocations/", START, "k" * 256)
    assert error_of(response) == (400, "invalid_request", "Idempotency-Key")
    assert snapshot() == before


@pytest.mark.postgres
def test_concurrent_requests_with_one_key_start_once(client_for, operator, monkeypatch):
    """The first request holds its key uncommitted inside services.start; the second one's
    claim of the same key waits on it (seen in pg_stat_activity), then replays the first
    response once it commits."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (a second connection waits on a row lock): set DATABASE_URL")
    inside_start, release = threading.Event(), threading.Event()
    real_start = services.start

    def held_start(*args, **kwargs):
        inside_start.set()
        assert release.wait(20)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(services, "start", held_start)
    results = {}

    def request(name):
        results[name] = post(client_for(operator), "/api/invocations/", START, "race")
        connection.close()

    first = threading.Thread(target=request, args=("first",))
    first.start()
    assert inside_start.wait(20)
    second = threading.Thread(target=request, args=("second",))
    second.start()
    with connection.cursor() as cursor:
        for _ in range(2000):
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                break
            release.wait(0.01)
        else:
            pytest.fail("the second request never waited on the first one's key")
    release.set()
    first.join(20)
    second.join(20)
    assert results["first"].status_code == results["second"].status_code == 202
    assert results["second"].json() == results["first"].json()
    assert results["second"]["Idempotent-Replayed"] == "true"
    assert Invocation.objects.count() == 1
