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
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.compare.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from bench.common import machine  # noqa: E402
from workflows.engine.events import Event  # noqa: E402
from workflows.engine.state import NodeRunState, WriteBatch  # noqa: E402
from workflows.engine.status import NodeStatus  # noqa: E402
from workflows.models import Invocation, Session  # noqa: E402
from workflows.store import DjangoStore  # noqa: E402
from workflows.store import sqlite as sqlite_dialect  # noqa: E402

OWNER = "step-cost"


class Counts:
    """What the store's cursors execute (statements, parameters) and, on PostgreSQL, the
    round trips: a statement outside a pipeline, a pipeline, a COMMIT. On SQLite every
    statement the library runs (BEGIN, SAVEPOINT and COMMIT too), from its trace hook."""

    def __init__(self) -> None:
        self.executed = self.parameters = self.round_trips = self.traced = 0
        self.in_pipeline = False

    def count(self, params: Any) -> None:
        self.executed += 1
        self.parameters += len(params or ())
        self.round_trips += not self.in_pipeline


def counting(counts: Counts) -> None:
    """Count what psycopg's and the SQLite dialect's cursors execute."""
    pg_execute, sqlite_execute = psycopg.Cursor.execute, sqlite_dialect._QmarkCursor.execute

    def pg(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        counts.count(params)
        return pg_execute(cursor, query, params, **kwargs)

    def lite(cursor: Any, sql: str, params: Any = ()) -> None:
        counts.count(params)
        sqlite_execute(cursor, sql, params)

    psycopg.Cursor.execute = pg  # type: ignore[method-assign]
    sqlite_dialect._QmarkCursor.execute = lite  # type: ignore[method-assign]
    connection.ensure_connection()
    if connection.vendor == "sqlite":

        def traced(statement: str) -> None:
            counts.traced += 1

        connection.connection.set_trace_callback(traced)
        return
    pipeline, commit = psycopg.Connection.pipeline, psycopg.Connection.commit

    @contextlib.contextmanager
    def counted_pipeline(self: Any) -> Iterator[Any]:
        counts.round_trips += 1
        counts.in_pipeline = True
        try:
            with pipeline(self) as p:
                yield p
        finally:
            counts.in_pipeline = False

    def counted_commit(self: Any) -> None:
        counts.round_trips += 1
        commit(self)

    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign]
    psycopg.Connection.commit = counted_commit  # type: ignore[method-assign]


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
    counts = Counts()
    counting(counts)
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
