"""The approvals inbox on a large table: 100,000 or 1,000,000 pending interrupts on
PostgreSQL (issue 18, "Inbox at scale").

Run from the repository root:

    python bench/inbox_list.py                       # 100,000 rows, 30 requests per page
    python bench/inbox_list.py --rows 1000000
    python bench/inbox_list.py --rows 20000 --repeat 10

What it does: builds a scratch database with the migrations ($HITL_BENCH_INBOX_DATABASE_URL,
default postgres://postgres@127.0.0.1:5432/hitl_bench_inbox; dropped and created anew each
run), so it has the indexes a deployment has (the trigram index among them). It seeds in
SQL (generate_series, the interrupt table's indexes dropped during the load and built
after it): one invocation per 100 interrupts, five workflows; half the interrupts open to
anyone who may answer, 30% to a group of the reader's, the rest to a colleague and a group
the reader is not in; one in 50 to the reader by name, one in 200 claimed by the reader,
four-eyes one in 9, quorum 2 with one decision one in 20, a deadline one in 7, priorities
urgent 2% / high 10% / low 10% / normal the rest, a due date one in 3 (a third of those
past), created over 30 days; a colleague who assigns work to the reader's names is away
with the reader as delegate. It ANALYZEs, then requests admin pages and the API through
Django's test client as a staff approver (not a superuser, in the assigned group). Each
page is requested once to warm up, then `--repeat` times; the table shows the median, p99
and fastest of the whole request (view, queries, template or serializer), the median time
of its SQL (on a machine shared with other work the Python slows more than the database),
the number of SQL queries per request and the load average around the run. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import build_database, machine, percentile, postgres_version  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_INBOX_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench_inbox"
)
WORKFLOWS = ["expense_approval", "content_moderation", "document_drafting", "vendor", "hiring"]
INBOX = "/admin/approvals/pendingapproval/"
API = "/api/interrupts/"
PER_INVOCATION = 100

# The seed, in SQL: %(rows)s interrupts over %(invocations)s invocations.
INSERT_INVOCATIONS = """
INSERT INTO workflows_invocation (id, workflow_name, workflow_version, status, input, error,
    created_at, updated_at, lease_owner, unfinished_deliveries, started_by_id, session_id,
    audit_head)
SELECT md5('invocation' || k)::uuid, (%(workflows)s::text[])[k %% 5 + 1], 'v1', 'WAITING',
    jsonb_build_object('case', k, 'amount', (k * 7919) %% 50000), '', now(), now(), '', 0,
    CASE WHEN k %% 10 = 0 THEN %(approver)s ELSE %(starter)s END, %(session)s, ''
FROM generate_series(0, %(invocations)s - 1) AS k
"""
INSERT_INTERRUPTS = """
INSERT INTO workflows_interrupt (id, invocation_id, workflow_name, path, run_id, message,
    payload, response_schema, assignees, quorum, four_eyes, require_signature, key_order,
    claimed_by_id, claimed_at, status, deadline, timeout_seconds, priority, due_at,
    due_seconds, escalation, escalation_step, consumed, deferred, created_at)
SELECT 'q-' || md5('interrupt' || n), md5('invocation' || (n / %(per)s))::uuid,
    (%(workflows)s::text[])[(n / %(per)s) %% 5 + 1],
    (%(workflows)s::text[])[(n / %(per)s) %% 5 + 1] || '@1/ask@' || (n %% %(per)s + 1),
    n %% %(per)s + 1,
    'Approve invoice ' || n || ' from vendor ' || (n %% 997) || '?',
    jsonb_build_object(
        'invoice', n, 'vendor', 'vendor ' || (n %% 997), 'lines', '[1, 2, 3]'::jsonb),
    '{"type": "object", "properties": {"approved": {"type": "boolean"}, "decisions": {}}}',
    CASE WHEN n %% 50 = 1 THEN '["user:approver"]'::jsonb
         WHEN n %% 10 < 5 THEN '[]'::jsonb
         WHEN n %% 10 < 8 THEN '["group:finance"]'::jsonb
         ELSE jsonb_build_array('user:colleague' || (n %% 50), 'group:legal') END,
    CASE WHEN n %% 20 = 0 THEN 2 ELSE 1 END, n %% 9 = 0, false, '{}',
    CASE WHEN n %% 200 = 3 THEN %(approver)s END, CASE WHEN n %% 200 = 3 THEN now() END,
    'pending',
    CASE WHEN n %% 7 = 0 THEN now() + (random() * 5 * 86400 - 3600) * interval '1 second' END,
    CASE WHEN n %% 7 = 0 THEN 3600 END,
    CASE (n::bigint * 7919 + n / 13) %% 50 WHEN 0 THEN 'urgent' ELSE CASE
         WHEN (n::bigint * 7919 + n / 13) %% 50 < 6 THEN 'high'
         WHEN (n::bigint * 7919 + n / 13) %% 50 < 11 THEN 'low' ELSE 'normal' END END,
    CASE WHEN n %% 3 = 0 THEN now() + (random() * 3 - 1) * 86400 * interval '1 second' END,
    CASE WHEN n %% 3 = 0 THEN 86400 END,
    '[]', 0, false, false, now() - random() * interval '30 days'
FROM generate_series(0, %(rows)s - 1) AS n
"""
INSERT_DECISIONS = """
INSERT INTO workflows_decision (interrupt_id, actor_id, response, comment, created_at)
SELECT id, %(colleague)s, '{"approved": true}', '', now()
FROM workflows_interrupt WHERE quorum = 2
"""
INTERRUPT_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE tablename = 'workflows_interrupt' AND indexname NOT LIKE '%%pkey'
"""


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()  # the test client's host, and response.context


def seed(rows: int) -> object:
    """Insert the inbox in SQL; return the approver who reads it."""
    from datetime import timedelta

    from django.contrib.auth.models import Group, Permission, User
    from django.db import connection
    from django.utils import timezone

    from workflows.models import Delegation, Session

    approver = User.objects.create_user("approver", password="pw", is_staff=True)
    approver.user_permissions.add(Permission.objects.get(codename="answer_interrupt"))
    Group.objects.create(name="finance").user_set.add(approver)
    starter = User.objects.create_user("starter")
    colleagues = User.objects.bulk_create([User(username=f"colleague{n}") for n in range(50)])
    # A delegate stands in only for someone who may answer (the answer policy).
    colleagues[8].user_permissions.add(Permission.objects.get(codename="answer_interrupt"))
    now = timezone.now()
    Delegation.objects.create(
        delegator=colleagues[8],
        delegate=approver,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=7),
    )
    values = {
        "rows": rows,
        "per": PER_INVOCATION,
        "invocations": max(1, -(-rows // PER_INVOCATION)),
        "workflows": WORKFLOWS,
        "approver": approver.pk,
        "starter": starter.pk,
        "colleague": colleagues[0].pk,
        "session": Session.objects.create().pk,
    }
    with connection.cursor() as cursor:
        cursor.execute(INTERRUPT_INDEXES)
        indexes = cursor.fetchall()
        for index_name, _ in indexes:
            cursor.execute(f'DROP INDEX "{index_name}"')
        cursor.execute(INSERT_INVOCATIONS, values)
        cursor.execute(INSERT_INTERRUPTS, values)
        cursor.execute(INSERT_DECISIONS, values)
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute("ANALYZE")
    return approver


def measure(client: object, url: str, repeat: int) -> dict[str, float]:
    """The request's median, p99 and fastest time, the median of its SQL's time (as the
    client measured each query: what a loaded machine slows less than the Python), its
    number of queries and of rows on the page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)  # warm-up
    assert response.status_code == 200, (url, response.status_code)
    samples, sql_samples = [], []
    queries = 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - started) * 1000)
        queries = len(captured)
        sql_samples.append(sum(float(query["time"]) for query in captured) * 1000)
    context = response.context
    if url.startswith(API):
        rows = len(response.json()["results"])
    else:
        rows = len(context["cl"].result_list) if context and "cl" in context else 0
    return {
        "median": statistics.median(samples),
        "p99": percentile(samples, 99),
        "fastest": min(samples),
        "sql": statistics.median(sql_samples),
        "queries": queries,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--reuse", action="store_true", help="measure the database a previous run seeded"
    )
    args = parser.parse_args()

    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    started = time.perf_counter()
    if args.reuse:
        name = connection.settings_dict["NAME"]
        approver = User.objects.get(username="approver")
    else:
        name = build_database(migrate=True)
        approver = seed(args.rows)
    seeded = time.perf_counter() - started
    client = Client()
    client.force_login(approver)

    from workflows.inbox import VIEWS, waiting_for
    from workflows.models import Interrupt

    first = waiting_for(approver).values_list("pk", flat=True).first()
    pending = Interrupt.objects.filter(status="pending").count()
    pages = [
        ("first page (inbox order)", INBOX),
        *((f"view {view}", f"{INBOX}?view={view}") for view in VIEWS),
        ("overdue, one workflow", f"{INBOX}?view=overdue&workflow=vendor"),
        ("search 'vendor 42?'", f"{INBOX}?q=vendor+42%3F"),
        ("search 'invoice 123456'", f"{INBOX}?q=invoice+123456"),
        ("search '123456'", f"{INBOX}?q=123456"),
        ("search '\"vendor 42?\"'", f"{INBOX}?q=%22vendor+42%3F%22"),
        ("decision page", f"{INBOX}{first}/change/"),
        ("admin index (counts)", "/admin/"),
        ("API inbox", f"{API}?status=pending"),
        *((f"API view {view}", f"{API}?view={view}") for view in ("mine", "overdue")),
        ("API priority=urgent", f"{API}?status=pending&priority=urgent"),
    ]
    print(machine(postgres_version()))
    print(f"database {name}: {pending:,} pending interrupts ({seeded:.1f} s to seed or open)")
    print(f"{args.repeat} requests per page after one warm-up; whole request through the client")
    print(f"load average before the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    columns = ["median ms", "p99 ms", "fastest ms", "SQL ms", "queries", "rows"]
    print(f"| {'page':<28} | " + " | ".join(columns) + " |")
    print("|" + "|".join(["---"] * (len(columns) + 1)) + "|")
    for label, url in pages:
        got = measure(client, url, args.repeat)
        cells = [f"{got[k]:.1f}" for k in ("median", "p99", "fastest", "sql")]
        cells += [str(got["queries"]), str(got["rows"])]
        print(f"| {label:<28} | " + " | ".join(cells) + " |")
    print()
    print(f"load average after the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
