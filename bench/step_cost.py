"""What one node transition costs the store, counted: the statements it sends, the round
trips, the parameters the driver adapts, and its median time (docs/performance.md,
"A node transition as one JSON parameter").

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hitl_bench python bench/step_cost.py --setup
    DATABASE_URL=postgres://... python bench/step_cost.py --transitions 300
    DATABASE_URL=sqlite:////tmp/step_cost.sqlite3 python bench/step_cost.py --setup

Each transition is one node run (done) and its event, written under the invocation's
lease through `DjangoStore.commit_sync` in its own transaction, as a run writes it
(one commit each). Client instructions: run it under
`valgrind --tool=cachegrind` with two `--transitions` counts and divide the difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.compare.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import machine  # noqa: E402
from bench.compare.systems.counting import StatementCounts  # noqa: E402
from workflows.engine.events import Event  # noqa: E402
from workflows.engine.state import NodeRunState, WriteBatch  # noqa: E402
from workflows.engine.status import NodeStatus  # noqa: E402
from workflows.models import Invocation, Session  # noqa: E402
from workflows.store import DjangoStore  # noqa: E402
from workflows.store import sqlite as sqlite_dialect  # noqa: E402

OWNER = "step-cost"


def counting() -> StatementCounts:
    """Count what psycopg's cursors and the SQLite dialect's execute (its statements and
    parameters; SQLite's trace hook sees BEGIN and COMMIT too)."""
    counts = StatementCounts()
    counts.watch_psycopg()
    sqlite_execute = sqlite_dialect._QmarkCursor.execute

    def lite(cursor: Any, sql: str, params: Any = ()) -> None:
        counts.count(params)
        sqlite_execute(cursor, sql, params)

    sqlite_dialect._QmarkCursor.execute = lite  # type: ignore[method-assign]
    connection.ensure_connection()
    if connection.vendor == "sqlite":
        counts.watch_sqlite(connection.connection)
    return counts


def invocation() -> str:
    session = Session.objects.create()
    row = Invocation.objects.create(
        session=session,
        workflow_name="step_cost",
        workflow_version="1",
        status=NodeStatus.RUNNING,
        input=1,
        lease_owner=OWNER,
    )
    return str(row.pk)


def batch(invocation_id: str, index: int) -> WriteBatch:
    path = f"step_cost@1/node{index}@1"
    state = NodeRunState(
        status=NodeStatus.COMPLETED,
        run_id=index,
        output={"value": index},
        name=f"node{index}",
        parent_path="step_cost@1",
        input={"value": index - 1},
        triggered_by=f"step_cost@1/node{index - 1}@1",
    )
    event = Event(
        invocation_id=invocation_id,
        author=f"node{index}",
        path=path,
        run_id=index,
        status=NodeStatus.COMPLETED,
        output={"value": index},
    )
    return WriteBatch(invocation_id, node_runs={path: state}, events=[event], lease_owner=OWNER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=300)
    parser.add_argument("--setup", action="store_true", help="migrate the database first")
    parser.add_argument("--quiet", action="store_true", help="no table (under valgrind)")
    args = parser.parse_args()
    if args.setup:
        call_command("migrate", run_syncdb=True, verbosity=0)
    store = DjangoStore(inline=True)
    invocation_id = invocation()
    counts = counting()
    times = []
    for index in range(1, args.transitions + 1):
        started = time.perf_counter_ns()
        store.commit_sync(batch(invocation_id, index))
        times.append(time.perf_counter_ns() - started)
    Invocation.objects.filter(pk=invocation_id).delete()
    if args.quiet:
        return
    n, sqlite = args.transitions, connection.vendor == "sqlite"
    print(machine())
    print(f"{connection.vendor}: {n} transitions (one node run and one event each)")
    print("| median ms | p90 ms | statements | round trips | parameters adapted |")
    print("|---|---|---|---|---|")
    statements = counts.traced if sqlite else counts.executed
    print(
        f"| {statistics.median(times) / 1e6:.3f} "
        f"| {statistics.quantiles(times, n=10)[-1] / 1e6:.3f} "
        f"| {statements / n:g} | {'-' if sqlite else f'{counts.round_trips / n:g}'} "
        f"| {counts.parameters / n:g} |"
    )


if __name__ == "__main__":
    main()
