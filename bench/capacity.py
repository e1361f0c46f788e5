"""The inputs of the capacity model in docs/scaling.md, measured with real `celery worker`
processes on PostgreSQL + Redis:

1. cost per completed invocation of the demo `expense_approval` workflow, on its two
   common paths (approved without asking: 4 function nodes; asking a manager: started,
   waiting, answered, completed): transactions and write transactions committed, WAL
   bytes, records and flushes, rows and bytes stored, broker messages and Redis commands,
   and CPU milliseconds of the worker, PostgreSQL, Redis and the process that starts and
   answers (the web process's part);
2. throughput (completed invocations per second) against the number of worker processes,
   with the worker's database connections kept (the default) and with Celery's new
   connection per task (HITL["WORKER_CONN_MAX_AGE"] = 0);
3. the model's line from (1) against the measured points of (2): docs/img/capacity.svg.

    python bench/capacity.py --private-servers             # everything, about 5 minutes
    python bench/capacity.py --private-servers --invocations 200 --workers 1 2
    python bench/capacity.py --pg postgres://postgres@127.0.0.1:5432 --redis redis://127.0.0.1:6379/7

The counters read here (pg_stat_wal, the next transaction id, the server's CPU time, Redis
INFO) belong to the whole server, not to one database: run on servers nothing else uses.
`--private-servers` starts a throwaway PostgreSQL cluster and Redis on loopback ports of
their own (in a temporary directory, removed at the end); CPU of a server is read from
/proc, so it is reported only for servers on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.capacity_model import (  # noqa: E402
    Costs,
    model_line,
    model_summary,
    plan_rows,
    report_tables,
    write_svg,
)
from bench.capacity_servers import (  # noqa: E402
    ProcessCpu,
    private_postgres,
    private_redis,
    redis_cpu_ms,
    redis_stats,
)
from bench.common import machine  # noqa: E402

RESULTS = ROOT / "bench" / "results"
AUTO_INPUT = {"amount": 50.0, "employee": "e", "purpose": "lunch"}  # approved without asking
MANAGER_INPUT = {"amount": 500.0, "employee": "e", "purpose": "travel"}  # asks a manager
POLL_SECONDS = 0.2  # how often the bench reads how many invocations are done


def configure(pg: str, redis: str) -> None:
    """Django and Celery of this process (the one that starts and answers) and of the
    workers, on the servers at `pg` and `redis`: before bench.compare is imported, which
    reads them once."""
    os.environ["HITL_BENCH_PG"] = pg
    os.environ["HITL_BENCH_REDIS"] = redis
    from bench.compare import scale
    from bench.compare.run import ensure_databases

    ensure_databases([scale.DATABASE])
    scale.setup(broker=True)
    scale.reset_database()


# --- what the database and the broker counted ---------------------------------------------


def table_names() -> list[str]:
    from django.db import connection

    return sorted(
        name
        for name in connection.introspection.table_names()
        if name.startswith(("workflows_", "approvals_"))
    )


def database_counters() -> dict[str, float]:
    """The server's counters that the work moves (all of them cluster-wide but the rows
    and sizes, which are this database's workflow tables)."""
    from django.db import connection

    tables = table_names()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, "
            "pg_snapshot_xmax(pg_current_snapshot())::text::bigint, "
            "(SELECT sum(xact_commit) FROM pg_stat_database), "
            "wal_records, wal_fpi, wal_bytes, wal_sync FROM pg_stat_wal"
        )
        lsn, next_xid, commits, records, fpi, wal_bytes, syncs = cursor.fetchone()
        cursor.execute(
            "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) t", [tables]
        )
        stored = cursor.fetchone()[0]
        rows = 0
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            rows += cursor.fetchone()[0]
    return {
        "wal_bytes_lsn": float(lsn),
        "write_transactions": float(next_xid),
        "transactions": float(commits),
        "wal_records": float(records),
        "wal_fpi": float(fpi),
        "wal_bytes": float(wal_bytes),
        "wal_flushes": float(syncs),
        "stored_bytes": float(stored),
        "rows": float(rows),
    }


def reset_wal_statistics() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")  # full-page images start anew for every run
        cursor.execute("SELECT pg_stat_reset_shared('wal')")


# --- driving the work ---------------------------------------------------------------------


class Driver:
    """Starts and answers invocations as a web process would, counting its own CPU time
    and the read-only transactions it runs to watch progress (subtracted from the
    database's count)."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0
        self.polls = 0

    def start(self, inputs: dict[str, Any], count: int) -> list[str]:
        from workflows import services

        begin = time.process_time()
        ids = [str(services.start("expense_approval", dict(inputs)).pk) for _ in range(count)]
        self.cpu_seconds += time.process_time() - begin
        return ids

    def answer_all(self, ids: list[str]) -> None:
        from workflows import services
        from workflows.engine import FunctionResponse
        from workflows.models import Interrupt

        questions = list(
            Interrupt.objects.filter(invocation_id__in=ids, status="pending").values_list(
                "pk", flat=True
            )
        )
        self.polls += 1
        assert len(questions) == len(ids), f"{len(questions)} questions for {len(ids)}"
        begin = time.process_time()
        for question in questions:
            services.submit_function_responses(
                [FunctionResponse(question, "manager_approval", {"approved": True})]
            )
        self.cpu_seconds += time.process_time() - begin

    def wait_until(self, ids: list[str], status: str, timeout: float = 600) -> float:
        """Poll until every invocation of `ids` shows `status` and no lease; perf_counter."""
        from workflows.models import Invocation

        rows = Invocation.objects.filter(pk__in=ids, status=status, lease_owner="")
        deadline = time.monotonic() + timeout
        while True:
            self.polls += 1
            if rows.count() == len(ids):
                return time.perf_counter()
            if time.monotonic() > deadline:
                raise TimeoutError(f"invocations not {status} within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)


def worker_env(keep_connections: bool) -> None:
    """What the worker processes started next run with (they inherit the environment)."""
    os.environ["HITL_BENCH_WORKER_CONN_MAX_AGE"] = "" if keep_connections else "0"


def costs_of(
    path: str, count: int, postgres_cpu: ProcessCpu, redis: str, keep_connections: bool = True
) -> dict[str, float]:
    """Run `count` invocations of `path` ("auto" or "manager") through one worker; the
    cost of each: counters' deltas divided by `count`."""
    from bench.compare.scale import celery_workers

    worker_env(keep_connections)
    driver = Driver()
    inputs = AUTO_INPUT if path == "auto" else MANAGER_INPUT
    with celery_workers(1, f"capacity-{path}") as processes:
        workers = ProcessCpu(p.pid for p in processes)
        warm = driver.start(inputs, 20)  # connections, caches, the first pages of the tables
        if path == "manager":
            driver.wait_until(warm, "WAITING")
            driver.answer_all(warm)
        driver.wait_until(warm, "COMPLETED")
        reset_wal_statistics()
        driver = Driver()
        before = database_counters()
        before_redis, redis_cpu = redis_stats(redis), redis_cpu_ms(redis)
        postgres_before, workers_before = postgres_cpu.ms(), workers.ms()
        ids = driver.start(inputs, count)
        if path == "manager":
            driver.wait_until(ids, "WAITING")
            driver.answer_all(ids)
        driver.wait_until(ids, "COMPLETED")
        worker_ms = workers.ms() - workers_before
    # The workers have exited: their statistics are flushed to the server.
    after = database_counters()
    after_redis = redis_stats(redis)
    result = {key: (after[key] - before[key]) / count for key in after}
    # This bench's own reads: its polls, and the queries of the first counters call.
    result["transactions"] -= (driver.polls + 3 + len(table_names())) / count
    result["worker_cpu_ms"] = worker_ms / count
    result["postgres_cpu_ms"] = (postgres_cpu.ms() - postgres_before) / count
    result["redis_cpu_ms"] = (redis_cpu_ms(redis) - redis_cpu) / count
    result["web_cpu_ms"] = driver.cpu_seconds * 1000 / count
    for key in after_redis:
        result[key] = (after_redis[key] - before_redis.get(key, 0)) / count
    result["invocations"] = count
    return result


def throughput(
    workers: int, count: int, keep_connections: bool, postgres_cpu: ProcessCpu, redis: str
) -> dict[str, float]:
    """Completed invocations per second of the auto path with `workers` worker processes,
    invocations created first, then one run message each published at once (as
    bench/compare/scale.py does); and the cores the workers, PostgreSQL and Redis used
    meanwhile (on a machine shared with other work, fewer than it has)."""
    from bench.compare.scale import celery_workers
    from workflows.models import Invocation, Session
    from workflows.registry import registry
    from workflows.tasks import run_invocation

    worker_env(keep_connections)
    definition = registry.get("expense_approval")
    label = f"capacity-{workers}-{'kept' if keep_connections else 'per-task'}"
    with celery_workers(workers, label) as processes:
        session = Session.objects.create()
        invocations = Invocation.objects.bulk_create(
            Invocation(
                session=session,
                workflow_name=definition.name,
                workflow_version=definition.version,
                input=dict(AUTO_INPUT),
            )
            for _ in range(count)
        )
        ids = [str(i.pk) for i in invocations]
        worker_cpu = ProcessCpu(p.pid for p in processes)
        cpu_before = worker_cpu.ms() + postgres_cpu.ms() + redis_cpu_ms(redis)
        begin = time.perf_counter()
        for invocation_id in ids:
            run_invocation.apply_async(args=[invocation_id])
        done = Driver().wait_until(ids, "COMPLETED")
        cpu_ms = worker_cpu.ms() + postgres_cpu.ms() + redis_cpu_ms(redis) - cpu_before
    seconds = done - begin
    return {
        "invocations": count,
        "seconds": seconds,
        "per_second": count / seconds,
        "cores_used": cpu_ms / 1000 / seconds,
    }


def commit_latency_ms(samples: int = 200) -> float:
    """Median of a bare `BEGIN; INSERT one small row; COMMIT` from this process: the
    floor under each write transaction (a round trip and a WAL flush)."""
    import statistics

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE commit_probe (n int)")
    times = []
    for n in range(samples):
        begin = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("INSERT INTO commit_probe VALUES (%s)", [n])
            cursor.execute("COMMIT")
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1000


# --- the run ------------------------------------------------------------------------------


def run(args: argparse.Namespace, pg: str, redis: str, postgres_cpu: ProcessCpu) -> dict:
    RESULTS.mkdir(parents=True, exist_ok=True)
    configure(pg, redis)
    from bench.common import postgres_version

    results: dict[str, Any] = {"machine": machine(f"PostgreSQL {postgres_version()}")}
    results["load_average_start"] = os.getloadavg()
    results["commit_latency_ms"] = commit_latency_ms()
    results["costs"] = {}
    for path in ("auto", "manager"):
        results["costs"][path] = costs_of(path, args.invocations, postgres_cpu, redis)
        print(f"costs of the {path} path measured", file=sys.stderr)
    # What Celery's new connection per task adds (CPU time: steadier than throughput on a
    # shared machine).
    results["costs"]["auto_per_task"] = costs_of(
        "auto", args.invocations, postgres_cpu, redis, keep_connections=False
    )
    results["throughput"] = {"kept": {}, "per_task": {}}
    for _round in range(args.rounds):
        for workers in args.workers:
            for key, keep in (("kept", True), ("per_task", False)):
                measured = throughput(
                    workers, args.throughput_invocations, keep, postgres_cpu, redis
                )
                results["throughput"][key].setdefault(str(workers), []).append(measured)
                print(f"{workers} workers, {key}: {measured['per_second']:.1f}/s", file=sys.stderr)
    results["load_average_end"] = os.getloadavg()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/7")
    parser.add_argument("--private-servers", action="store_true", help="throwaway servers")
    parser.add_argument("--invocations", type=int, default=400, help="per cost measurement")
    parser.add_argument("--throughput-invocations", type=int, default=400)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds")
    parser.add_argument("--from-results", help="report and plot a saved results file")
    args = parser.parse_args()
    if args.from_results:
        results = json.loads(Path(args.from_results).read_text())
    elif args.private_servers:
        with private_postgres() as (pg, postgres_cpu), private_redis() as redis:
            results = run(args, pg, redis, postgres_cpu)
    else:
        results = run(args, args.pg, args.redis, ProcessCpu.of_postgres(args.pg))
    if not args.from_results:
        RESULTS.mkdir(parents=True, exist_ok=True)
        saved = RESULTS / f"capacity-{time.strftime('%Y%m%d-%H%M%S')}.json"
        saved.write_text(json.dumps(results, indent=1))
        print(f"results: {saved}", file=sys.stderr)
    costs = Costs.from_results(results)
    write_svg(results, model_line(costs, max(int(w) for w in results["throughput"]["kept"])))
    print(report_tables(results))
    print()
    print(model_summary(costs))
    print()
    print(plan_rows(costs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
