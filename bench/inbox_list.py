"""The approvals inbox on a large table: 100,000 pending interrupts on PostgreSQL.

Run from the repository root:

    python bench/inbox_list.py              # 100,000 rows, 30 requests per page
    python bench/inbox_list.py --rows 20000 --repeat 10

What it does: builds a scratch database from the models ($HITL_BENCH_INBOX_DATABASE_URL,
default postgres://postgres@127.0.0.1:5432/hitl_bench_inbox; dropped and created anew each
run, as Django's test runner does with migrations off), bulk-inserts 1,000 invocations with
100 pending interrupts each (a mix of unassigned, group- and user-assigned, four-eyes,
quorum-2 with one decision, deadlines past and future, five workflows, created over 30
days), ANALYZEs, then requests admin pages through Django's test client as a staff approver
(not a superuser, in the assigned group). Each page is requested once to warm up, then
`--repeat` times; the table shows the median and p99 of the whole request (view, queries,
template) and the number of SQL queries per request. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine, percentile, postgres_version  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_INBOX_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench_inbox"
)
WORKFLOWS = ["expense_approval", "content_moderation", "document_drafting", "vendor", "hiring"]
INBOX = "/admin/approvals/pendingapproval/"


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()  # the test client's host, and response.context


def build_database() -> str:
    """A fresh database with tables made from the models; returns its name."""
    from django.db import connection

    name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"].update(NAME=name, MIGRATE=False)
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return name


def seed(rows: int) -> object:
    """Bulk-insert the inbox; return the approver who reads it."""
    from django.contrib.auth.models import Group, Permission, User
    from django.db import connection

    from workflows.models import Decision, Interrupt, Invocation, Session

    rng = random.Random(7)
    approver = User.objects.create_user("approver", password="pw", is_staff=True)
    approver.user_permissions.add(Permission.objects.get(codename="answer_interrupt"))
    Group.objects.create(name="finance").user_set.add(approver)
    starter = User.objects.create_user("starter")
    colleagues = User.objects.bulk_create([User(username=f"colleague{n}") for n in range(50)])

    per_invocation = 100
    session = Session.objects.create()
    invocations = Invocation.objects.bulk_create(
        [
            Invocation(
                session=session,
                workflow_name=WORKFLOWS[n % len(WORKFLOWS)],
                workflow_version="v1",
                status="WAITING",
                input={"case": n, "amount": rng.randint(10, 50_000)},
                started_by=approver if n % 10 == 0 else starter,
            )
            for n in range(max(1, rows // per_invocation))
        ],
        batch_size=1000,
    )
    now_deadline = time.time()
    batch: list[Interrupt] = []
    decided: list[str] = []
    for n in range(rows):
        invocation = invocations[n // per_invocation % len(invocations)]
        kind = n % 10
        assignees = (
            []
            if kind < 5
            else ["group:finance"]
            if kind < 8
            else [f"user:colleague{n % 50}", "group:legal"]
        )
        interrupt_id = f"q-{uuid.UUID(int=rng.getrandbits(128))}"
        deadline = None
        if n % 7 == 0:
            offset = rng.randint(-3600, 5 * 86400)
            deadline = datetime.fromtimestamp(now_deadline + offset, UTC)
        quorum = 2 if n % 20 == 0 else 1
        if quorum == 2:
            decided.append(interrupt_id)
        batch.append(
            Interrupt(
                id=interrupt_id,
                invocation=invocation,
                workflow_name=invocation.workflow_name,
                path=f"{invocation.workflow_name}@1/ask@{n % per_invocation + 1}",
                run_id=n % per_invocation + 1,
                message=f"Approve invoice {n} from vendor {n % 997}?",
                payload={"invoice": n, "vendor": f"vendor {n % 997}", "lines": [1, 2, 3]},
                response_schema={
                    "type": "object",
                    "properties": {"approved": {"type": "boolean"}, "decisions": {}},
                },
                assignees=assignees,
                quorum=quorum,
                four_eyes=n % 9 == 0,
                deadline=deadline,
                timeout_seconds=3600 if deadline else None,
            )
        )
        if len(batch) == 5000:
            Interrupt.objects.bulk_create(batch)
            batch = []
    Interrupt.objects.bulk_create(batch)
    Decision.objects.bulk_create(
        [
            Decision(interrupt_id=i, actor=colleagues[k % 50], response={"approved": True})
            for k, i in enumerate(decided)
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE workflows_interrupt SET created_at = now() - random() * interval '30 days'"
        )
        cursor.execute("ANALYZE")
    return approver


def measure(client: object, url: str, repeat: int) -> tuple[float, float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)  # warm-up
    assert response.status_code == 200, (url, response.status_code)
    samples = []
    queries = 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - started) * 1000)
        queries = len(captured)
    context = response.context
    rows = len(context["cl"].result_list) if context and "cl" in context else 0
    return statistics.median(samples), percentile(samples, 99), queries, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    setup_django()
    from django.test import Client

    name = build_database()
    started = time.perf_counter()
    approver = seed(args.rows)
    seeded = time.perf_counter() - started
    client = Client()
    client.force_login(approver)

    from workflows.models import Interrupt

    first = Interrupt.objects.order_by("created_at").values_list("pk", flat=True).first()
    pages = [
        ("first page (oldest first)", INBOX),
        ("by deadline, assigned to me", f"{INBOX}?assigned=yes&o=5"),
        ("overdue, one workflow", f"{INBOX}?overdue=yes&workflow=vendor"),
        ("search 'vendor 42'", f"{INBOX}?q=vendor+42%3F"),
        ("decision page", f"{INBOX}{first}/change/"),
        ("admin index (count)", "/admin/"),
    ]
    print(machine(postgres_version()))
    print(f"database {name}: {args.rows:,} pending interrupts seeded in {seeded:.1f} s")
    print(f"{args.repeat} requests per page after one warm-up; whole request through the client")
    print()
    header = f"| {'page':<30} | {'median ms':>9} | {'p99 ms':>8} | {'queries':>7} | {'rows':>5} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for label, url in pages:
        median, p99, queries, rows = measure(client, url, args.repeat)
        print(f"| {label:<30} | {median:>9.1f} | {p99:>8.1f} | {queries:>7} | {rows:>5} |")


if __name__ == "__main__":
    main()
