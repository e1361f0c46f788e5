"""The approvals dashboard on a large history: its page and its figures on PostgreSQL.

Run from the repository root:

    python bench/dashboard.py                        # 200,000 decisions, 20 requests each
    python bench/dashboard.py --decisions 50000 --repeat 10

What it does: builds a scratch database from the models ($HITL_BENCH_DASHBOARD_DATABASE_URL,
default postgres://postgres@127.0.0.1:5432/hitl_bench_dashboard; dropped and created anew
each run), bulk-inserts `--decisions` answered questions with one decision each by 50
approvers over the last 180 days (so a 90-day period reads about half of them) and 10,000
pending questions of mixed priorities and due dates, ANALYZEs, then requests the dashboard
through Django's test client as a superuser for each period, of all workflows and of one,
and times `dashboard_figures` alone. Each is run once to warm up, then `--repeat` times;
the table shows the median and p99 and the SQL queries per run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import build_database, machine, percentile, postgres_version  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_DASHBOARD_DATABASE_URL",
    "postgres://postgres@127.0.0.1:5432/hitl_bench_dashboard",
)
WORKFLOWS = ["expense_approval", "content_moderation", "document_drafting", "support_agent"]
PENDING = 10_000
DASHBOARD = "/admin/workflows/decision/dashboard/"


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()


def seed(decisions: int) -> object:
    """Bulk-insert the history and the open questions; return the superuser who looks."""
    from django.contrib.auth.models import User
    from django.db import connection

    from workflows.models import Decision, Interrupt, Invocation, Session

    rng = random.Random(16)
    admin = User.objects.create_superuser("admin", password="pw")
    approvers = User.objects.bulk_create([User(username=f"approver{n}") for n in range(50)])
    session = Session.objects.create()
    invocations = Invocation.objects.bulk_create(
        [
            Invocation(
                session=session,
                workflow_name=WORKFLOWS[n % len(WORKFLOWS)],
                workflow_version="v1",
                status="WAITING",
            )
            for n in range(1000)
        ]
    )
    now = datetime.now(UTC)
    questions: list[Interrupt] = []
    answers: list[Decision] = []
    asked_at: dict[str, datetime] = {}
    for n in range(decisions + PENDING):
        invocation = invocations[n % len(invocations)]
        pending = n >= decisions
        interrupt_id = f"q-{n}"
        asked_at[interrupt_id] = now - timedelta(seconds=rng.uniform(0, 180 * 86400))
        questions.append(
            Interrupt(
                id=interrupt_id,
                invocation=invocation,
                workflow_name=invocation.workflow_name,
                path=f"{invocation.workflow_name}@1/ask@{n}",
                run_id=1,
                status="pending" if pending else "resolved",
                priority=("low", "normal", "normal", "high", "urgent")[n % 5],
                due_at=now + timedelta(hours=rng.uniform(-48, 48)) if n % 3 == 0 else None,
            )
        )
        if not pending:
            answers.append(
                Decision(
                    interrupt_id=interrupt_id,
                    actor=approvers[n % 50],
                    response={"approved": rng.random() < 0.8},
                )
            )
        if len(questions) == 5000:
            Interrupt.objects.bulk_create(questions)
            Decision.objects.bulk_create(answers)
            questions, answers = [], []
    Interrupt.objects.bulk_create(questions)
    Decision.objects.bulk_create(answers)
    with connection.cursor() as cursor:
        # Asked over 180 days (the open ones within 10); decided seconds to days later.
        cursor.execute(
            "UPDATE workflows_interrupt SET created_at = now() - random() * "
            "CASE WHEN status = 'pending' THEN interval '10 days' ELSE interval '180 days' END"
        )
        cursor.execute(
            "UPDATE workflows_decision d SET created_at = LEAST(now(), i.created_at + "
            "exp(random() * 12) * interval '1 second') FROM workflows_interrupt i "
            "WHERE i.id = d.interrupt_id"
        )
        cursor.execute("ANALYZE")
    return admin


def timed(run: object, repeat: int) -> tuple[float, float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run()  # warm-up
    samples = []
    queries = 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            run()
            samples.append((time.perf_counter() - started) * 1000)
        queries = len(captured)
    return statistics.median(samples), percentile(samples, 99), queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    setup_django()
    from django.test import Client

    from approvals.figures import dashboard_figures

    name = build_database()
    started = time.perf_counter()
    admin = seed(args.decisions)
    seeded = time.perf_counter() - started
    client = Client()
    client.force_login(admin)

    def page(query: str) -> object:
        def get() -> None:
            response = client.get(DASHBOARD + query)
            assert response.status_code == 200, response.status_code

        return get

    runs = [(f"page, {days} days", page(f"?period={days}")) for days in (7, 30, 90)] + [
        ("page, 90 days, one workflow", page("?period=90&workflow=expense_approval")),
        ("figures alone, 90 days", lambda: dashboard_figures(days=90)),
    ]
    print(machine(postgres_version()))
    print(
        f"database {name}: {args.decisions:,} decisions over 180 days and {PENDING:,} "
        f"pending questions seeded in {seeded:.1f} s"
    )
    print(f"{args.repeat} runs each after one warm-up")
    print()
    header = f"| {'what':<30} | {'median ms':>9} | {'p99 ms':>8} | {'queries':>7} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for label, run in runs:
        median, p99, queries = timed(run, args.repeat)
        print(f"| {label:<30} | {median:>9.1f} | {p99:>8.1f} | {queries:>7} |")


if __name__ == "__main__":
    main()
