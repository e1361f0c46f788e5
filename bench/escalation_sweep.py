"""The escalation sweep's cost: 10,000 open questions carrying ladders on PostgreSQL.

Run from the repository root:

    python bench/escalation_sweep.py                 # 10,000 questions, 30 idle sweeps
    python bench/escalation_sweep.py --rows 2000 --repeat 10

What it does: builds a scratch database from the models ($HITL_BENCH_ESCALATION_DATABASE_URL,
default postgres://postgres@127.0.0.1:5432/hitl_bench_escalation; dropped and created anew
each run), bulk-inserts `--rows` pending interrupts (100 per invocation) asked of
group:managers within the last hour, each with the demo's two-step ladder (remind after 4
hours, hand over to group:directors after 24), and ANALYZEs. Then it times
`services.escalate_interrupts(now)`, each sweep taking at most its batch (500) of the due
questions:

- idle: nothing due yet (`--repeat` sweeps), and again once every ladder is used up;
- reminders: 4 h 1 min on, every question's reminder due, swept batch by batch until none
  is left; likewise the hand-overs at 24 h 1 min (the new assignees checked against the
  quorum, the claim dropped), and, after the ladders are reset, both steps overdue at
  once (`--both` questions: two steps in one transaction).

Per step: each interrupt's transaction (its locks, the step or steps, their audit entries)
timed alone, divided by the steps it applied. The ratio column compares a row's per-step
median with the reminders'. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import build_database, machine, percentile, postgres_version, progress  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_ESCALATION_DATABASE_URL",
    "postgres://postgres@127.0.0.1:5432/hitl_bench_escalation",
)
LADDER = [
    {"after": 4 * 3600.0, "remind": True, "assignees": None},
    {"after": 24 * 3600.0, "remind": False, "assignees": ["group:directors"]},
]
PER_INVOCATION = 100


def setup_django() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django

    django.setup()


def seed(rows: int) -> Any:
    """Bulk-insert the open questions; return the time they count from."""
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.utils import timezone

    from workflows.models import Interrupt, Invocation, Session

    rng = random.Random(11)
    for group, count in (("managers", 5), ("directors", 3)):
        members = User.objects.bulk_create([User(username=f"{group}{n}") for n in range(count)])
        Group.objects.create(name=group).user_set.add(*members)
    session = Session.objects.create()
    invocations = Invocation.objects.bulk_create(
        [
            Invocation(
                session=session,
                workflow_name="expense_approval",
                workflow_version="v1",
                status="WAITING",
                input={"case": n},
            )
            for n in range(max(1, rows // PER_INVOCATION))
        ],
        batch_size=1000,
    )
    now = timezone.now()
    batch = []
    for n in range(rows):
        invocation = invocations[n // PER_INVOCATION % len(invocations)]
        asked = now - timedelta(seconds=rng.uniform(0, 3600))
        batch.append(
            Interrupt(
                id=f"q-{uuid.UUID(int=rng.getrandbits(128))}",
                invocation=invocation,
                workflow_name=invocation.workflow_name,
                path=f"expense_approval@1/manager_approval@{n % PER_INVOCATION + 1}",
                run_id=n % PER_INVOCATION + 1,
                message=f"Approve expense {n}?",
                payload={"amount": rng.randint(100, 5000)},
                response_schema={"type": "object", "properties": {"approved": {}}},
                assignees=["group:managers"],
                escalation=LADDER,
                next_escalation_at=asked + timedelta(seconds=LADDER[0]["after"]),
                due_at=asked + timedelta(hours=8),
                due_seconds=8 * 3600.0,
                priority="high" if n % 3 == 0 else "normal",
            )
        )
    Interrupt.objects.bulk_create(batch, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return now


class TimedSteps:
    """Times each interrupt's escalation transaction, as the sweep runs it."""

    def __init__(self) -> None:
        from workflows.services import sweeps as escalation

        self.module = escalation
        self.real = escalation._escalate
        self.per_step: list[float] = []

    def __enter__(self) -> TimedSteps:
        def timed(interrupt_id: str, now: Any) -> int:
            started = time.perf_counter()
            applied = self.real(interrupt_id, now)
            if applied:
                self.per_step.append((time.perf_counter() - started) * 1000 / applied)
            return applied

        self.module._escalate = timed
        return self

    def __exit__(self, *exc: object) -> None:
        self.module._escalate = self.real


def sweep_until_done(now: Any) -> tuple[list[float], list[float], int]:
    """Sweep at `now` until nothing is due; the sweeps' times, the per-step times and the
    steps applied."""
    from workflows import services

    sweeps: list[float] = []
    steps = 0
    with TimedSteps() as timed:
        while True:
            started = time.perf_counter()
            applied = services.escalate_interrupts(now=now)
            if not applied:
                break
            sweeps.append((time.perf_counter() - started) * 1000)
            steps += applied
            progress(f"{steps:,} steps applied")
    return sweeps, timed.per_step, steps


def idle(now: Any, repeat: int) -> list[float]:
    from workflows import services

    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        assert services.escalate_interrupts(now=now) == 0
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def reset_ladders(count: int) -> None:
    """Put `count` questions back as asked: no step applied, the first due 4 h after the
    asked time (8 h before the due date)."""
    from django.db.models import F

    from workflows.models import Interrupt

    chosen = list(Interrupt.objects.order_by("pk").values_list("pk", flat=True)[:count])
    Interrupt.objects.filter(pk__in=chosen).update(
        assignees=["group:managers"],
        escalation_step=0,
        next_escalation_at=F("due_at") - timedelta(hours=4),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--both", type=int, default=2_000, help="questions with 2 steps due")
    args = parser.parse_args()

    setup_django()
    name = build_database()
    started = time.perf_counter()
    base = seed(args.rows)
    seeded = time.perf_counter() - started

    rows: list[tuple[str, list[float], list[float], int]] = []
    rows.append(("idle: nothing due", idle(base, args.repeat), [], 0))
    for label, offset in (
        ("reminders (step 1)", timedelta(hours=4, minutes=1)),
        ("hand-overs (step 2)", timedelta(hours=24, minutes=1)),
    ):
        rows.append((label, *sweep_until_done(base + offset)))
    rows.append(("idle: every ladder used up", idle(base + timedelta(days=2), args.repeat), [], 0))
    reset_ladders(args.both)
    rows.append(("both steps overdue at once", *sweep_until_done(base + timedelta(days=2))))

    print(machine(postgres_version(), f"load average {os.getloadavg()[0]:.1f}"))
    print(
        f"database {name}: {args.rows:,} open questions with a two-step ladder, "
        f"seeded in {seeded:.1f} s; a sweep takes at most 500 questions"
    )
    print()
    header = (
        f"| {'sweep':<28} | {'sweeps':>6} | {'steps':>6} | {'sweep median ms':>15} | "
        f"{'sweep p99 ms':>12} | {'per step median ms':>18} | {'per step p99 ms':>15} | "
        f"{'ratio':>5} |"
    )
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    reminder = statistics.median(rows[1][2])
    for label, sweeps, per_step, steps in rows:
        step_cells = (
            f"{statistics.median(per_step):>18.2f} | {percentile(per_step, 99):>15.2f} | "
            f"{statistics.median(per_step) / reminder:>5.2f}"
            if per_step
            else f"{'-':>18} | {'-':>15} | {'-':>5}"
        )
        print(
            f"| {label:<28} | {len(sweeps):>6} | {steps:>6,} | {statistics.median(sweeps):>15.1f} "
            f"| {percentile(sweeps, 99):>12.1f} | {step_cells} |"
        )


if __name__ == "__main__":
    main()
