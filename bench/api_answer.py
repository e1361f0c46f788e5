"""API benchmark: answer latency through the REST API, and the inbox at 100,000 pending
interrupts.

Run from the repository root:

    python bench/api_answer.py            # 1,000 answers, inbox at 1,000 / 10,000 / 100,000
    python bench/api_answer.py --quick    # 200 answers, inbox at 1,000 / 10,000

What is timed (in-process: DRF's APIClient calls the Django handler directly, so there is
no socket, no HTTP parsing and no web server; everything else a request goes through runs:
middleware, token authentication, throttling, permission checks, parsing, the service,
serialization):

1. Answer: `POST function-responses/` with a token, from the call until the 202 response
   is back: validation, the answer policy, `services.submit_function_responses` (row
   lock, schema validation, the answer, its event, COMMIT) and the resume task's publish
   to Redis on commit. No worker runs: the resume itself is not part of the answer.
   Each of the N answers goes to its own waiting `expense_approval` invocation.
   Also `POST interrupts/{id}/decisions/` (a person's decision, quorum 1) for comparison.
2. Inbox: `GET interrupts/?status=pending` (the first page, 50 rows, with the total count)
   for a member of the `managers` group, at growing numbers of pending interrupts; the
   page time (median and p99 of 30 requests), the SQL queries one request runs, and the
   database time of its two interrupt queries (the total count and the page itself).

Services: PostgreSQL at $HITL_BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/hitl_api_bench; the tables are built from the models in
a scratch database `test_<name>`, dropped afterwards) and Redis at $HITL_BENCH_BROKER_URL
(default redis://127.0.0.1:6379/4; the bench publishes to, and then deletes, a queue of
its own). DEBUG is off, as in production.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATABASE_URL = os.environ.get(
    "HITL_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_api_bench"
)
BROKER_URL = os.environ.get("HITL_BENCH_BROKER_URL", "redis://127.0.0.1:6379/4")
QUEUE = "hitl_api_bench"
INBOX_REQUESTS = 30

os.environ.update(
    DJANGO_SETTINGS_MODULE="hitl_site.settings",
    DATABASE_URL=DATABASE_URL,
    CELERY_BROKER_URL=BROKER_URL,
    CELERY_TASK_DEFAULT_QUEUE=QUEUE,
    DEBUG="false",
    ALLOWED_HOSTS="testserver",
    API_THROTTLE_USER="1000000/minute",
    LOG_LEVEL="WARNING",
    DJANGO_LOG_LEVEL="ERROR",
)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Group, Permission  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from bench.common import machine, percentile, postgres_version, progress  # noqa: E402
from hitl_site.celery import app as celery_app  # noqa: E402
from workflows import services  # noqa: E402
from workflows.models import Interrupt, Invocation  # noqa: E402


def manager() -> Any:
    user = Invocation._meta.get_field("started_by").related_model.objects.create(
        username=f"bench-{uuid.uuid4().hex[:8]}"
    )
    user.groups.add(Group.objects.get_or_create(name="managers")[0])
    for codename in ("answer_interrupt", "add_invocation"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return user


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def waiting_questions(count: int, user: Any) -> list[str]:
    """`count` expense approvals waiting for a manager; runs them the way a worker would."""
    ids = []
    for index in range(count):
        invocation = services.start(
            "expense_approval", {"amount": 250 + index % 500, "employee": "Ada"}, user=user
        )
        services.execute(str(invocation.pk))
        ids.append(Interrupt.objects.get(invocation=invocation, status="pending").pk)
        if (index + 1) % 250 == 0:
            progress(f"{index + 1}/{count} invocations waiting")
    return ids


def time_posts(client: APIClient, requests: list[tuple[str, dict]]) -> list[float]:
    samples = []
    for url, body in requests:
        begin = time.perf_counter_ns()
        response = client.post(url, body, format="json")
        samples.append((time.perf_counter_ns() - begin) / 1e6)
        assert response.status_code == 202, response.content
    return samples


def answers(n: int) -> list[tuple[str, list[float]]]:
    answerer, starter = manager(), manager()
    client = client_for(answerer)
    rows = []
    progress(f"function responses: preparing {n} waiting invocations")
    questions = waiting_questions(n, starter)
    body = {"approved": True, "comment": "ok"}
    requests = [
        ("/api/function-responses/", {"function_responses": [{"id": i, "response": body}]})
        for i in questions
    ]
    rows.append(("POST function-responses/ (answer)", time_posts(client, requests)))
    progress(f"decisions: preparing {n} waiting invocations")
    questions = waiting_questions(n, starter)
    requests = [(f"/api/interrupts/{i}/decisions/", {"response": body}) for i in questions]
    rows.append(("POST interrupts/{id}/decisions/", time_posts(client, requests)))
    return rows


def fill_inbox(total: int, template: Interrupt) -> None:
    """Add pending interrupts (copies of a real one, on invocations of 100 each) until there
    are `total`."""
    missing = total - Interrupt.objects.filter(status="pending").count()
    batch = 5000
    while missing > 0:
        size = min(batch, missing)
        invocations = Invocation.objects.bulk_create(
            Invocation(
                session_id=template.invocation.session_id,
                workflow_name=template.workflow_name,
                workflow_version=template.invocation.workflow_version,
                status="WAITING",
            )
            for _ in range(-(-size // 100))
        )
        Interrupt.objects.bulk_create(
            Interrupt(
                id=uuid.uuid4().hex,
                invocation=invocations[index // 100],
                workflow_name=template.workflow_name,
                path=template.path,
                run_id=1,
                message=template.message,
                payload=template.payload,
                response_schema=template.response_schema,
                assignees=template.assignees,
            )
            for index in range(size)
        )
        missing -= size
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflows_interrupt")


def inbox(sizes: list[int]) -> list[tuple[int, list[float], int, int]]:
    reader = manager()
    client = client_for(reader)
    template = Interrupt.objects.filter(status="pending").first()
    if template is None:
        waiting_questions(1, manager())
        template = Interrupt.objects.filter(status="pending").first()
    rows = []
    for size in sizes:
        progress(f"inbox: {size} pending interrupts")
        fill_inbox(size, template)
        client.get("/api/interrupts/?status=pending")  # warm-up
        samples = []
        for _ in range(INBOX_REQUESTS):
            begin = time.perf_counter_ns()
            response = client.get("/api/interrupts/?status=pending")
            samples.append((time.perf_counter_ns() - begin) / 1e6)
        assert response.status_code == 200
        with CaptureQueriesContext(connection) as queries:
            count = client.get("/api/interrupts/?status=pending").json()["count"]
        sql = {"count": 0.0, "page": 0.0}
        for query in queries.captured_queries:
            if "workflows_interrupt" in query["sql"]:
                kind = "count" if query["sql"].startswith("SELECT COUNT(*)") else "page"
                sql[kind] += float(query["time"]) * 1000
        rows.append((size, samples, len(queries), count, sql["count"], sql["page"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 answers, smaller inboxes")
    args = parser.parse_args()
    n = 200 if args.quick else 1000
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]

    connection.settings_dict["TEST"]["MIGRATE"] = False  # tables from the models
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    celery_app.conf.update(task_always_eager=False, task_default_queue=QUEUE)
    try:
        print(machine(postgres_version()))
        print(f"database: {test_name}; broker: {BROKER_URL} (queue {QUEUE}, no worker)")
        print(
            "\nAnswer latency, in-process APIClient with a token: call to 202 response "
            f"(ms, {n} answers each)"
        )
        print(f"{'request':<36} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}")
        for name, samples in answers(n):
            print(
                f"{name:<36} {statistics.median(samples):8.2f} {percentile(samples, 90):8.2f} "
                f"{percentile(samples, 99):8.2f} {max(samples):8.2f}"
            )
        print(
            f"\nInbox: GET interrupts/?status=pending, first page of 50 with the count "
            f"({INBOX_REQUESTS} requests each)"
        )
        print(
            f"{'pending':>9} {'p50 ms':>8} {'p99 ms':>8} {'queries':>8} {'count':>9} "
            f"{'SQL count ms':>13} {'SQL page ms':>12}"
        )
        for size, samples, queries, count, count_ms, page_ms in inbox(sizes):
            print(
                f"{size:>9,} {statistics.median(samples):8.2f} {percentile(samples, 99):8.2f} "
                f"{queries:>8} {count:>9,} {count_ms:13.2f} {page_ms:12.2f}"
            )
    finally:
        with celery_app.connection_for_write() as conn:
            celery_app.amqp.queues[QUEUE].bind(conn.default_channel).delete()
        connection.creation.destroy_test_db(settings.DATABASES["default"]["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
