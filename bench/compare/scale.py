"""This project at scale, on PostgreSQL (and Redis for the workers):

1. resume latency (answer accepted -> COMPLETED, in-process, eager) of the demo
   `expense_approval` workflow on an empty database, then with 100,000 invocations
   waiting (bulk-seeded by copying a real waiting invocation's rows in SQL);
2. bytes stored per waiting invocation of `expense_approval` (table and index growth over
   1,000 of them, and the rows' own sizes);
3. throughput: completed invocations per second with 1, 2 and 4 `celery worker -P solo`
   processes on PostgreSQL + Redis (the auto-approved path of `expense_approval`);
4. end to end through one real worker: an expense that asks its manager, answered once it
   waits, until its row shows COMPLETED (polled every millisecond), one at a time; beside
   the same answer run in-process (eager).

    .venv-bench/bin/python -m bench.compare.scale            # everything, a few minutes
    .venv-bench/bin/python -m bench.compare.scale --seed 20000 --invocations 200
    .venv-bench/bin/python -m bench.compare.scale --only worker

PostgreSQL database $HITL_BENCH_PG/h_perf_scale (created when missing, emptied and built
anew), Redis $HITL_BENCH_REDIS (default redis://127.0.0.1:6379/7, queue `hitl_perf`,
purged).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import percentile
from bench.compare.run import ensure_databases, scratch

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PG = os.environ.get("HITL_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("HITL_BENCH_REDIS", "redis://127.0.0.1:6379/7")
DATABASE = scratch("h_perf_scale")
QUEUE = "hitl_perf"
MANAGER_AMOUNT = 500.0  # asks a manager (expense_approval)
AUTO_AMOUNT = 50.0  # approved without asking
POLL_SECONDS = 0.001  # how often the end-to-end phase reads the invocation's row


def setup(broker: bool) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.compare.settings"
    os.environ["DATABASE_URL"] = f"{PG}/{DATABASE}"
    os.environ["DEBUG"] = "false"
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = QUEUE
    if broker:
        os.environ["CELERY_BROKER_URL"] = REDIS
    else:
        os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()


def reset_database() -> None:
    from django.core.management import call_command
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)


def waiting_expense() -> tuple[str, str]:
    """Start an expense that waits for its manager; (invocation id, interrupt id)."""
    from workflows import services
    from workflows.models import Interrupt

    invocation = services.start(
        "expense_approval", {"amount": MANAGER_AMOUNT, "employee": "ann", "purpose": "travel"}
    )
    interrupt = Interrupt.objects.get(invocation_id=invocation.pk, status="pending")
    return str(invocation.pk), interrupt.pk


def resume_latencies(count: int, warm_up: int = 50) -> list[float]:
    from workflows import services
    from workflows.engine import FunctionResponse

    samples = []
    for index in range(warm_up + count):
        _, interrupt_id = waiting_expense()
        begin = time.perf_counter()
        services.submit_function_responses(
            [FunctionResponse(interrupt_id, "manager_approval", {"approved": True})]
        )
        if index >= warm_up:
            samples.append(time.perf_counter() - begin)
    return samples


TABLES = ["workflows_session", "workflows_invocation", "workflows_noderun"]
TABLES += ["workflows_sessionevent", "workflows_interrupt"]


def stored_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) t", [TABLES]
        )
        return int(cursor.fetchone()[0])


def row_bytes(invocation_id: str) -> dict[str, int]:
    """The rows' own sizes (pg_column_size of each row) of one invocation, per table."""
    from django.db import connection

    sizes = {}
    queries = {
        "invocation": "SELECT sum(pg_column_size(t.*)) FROM workflows_invocation t WHERE id = %s",
        "node runs": "SELECT sum(pg_column_size(t.*)) FROM workflows_noderun t "
        "WHERE invocation_id = %s",
        "events": "SELECT sum(pg_column_size(t.*)) FROM workflows_sessionevent t "
        "WHERE invocation_id = %s",
        "interrupts": "SELECT sum(pg_column_size(t.*)) FROM workflows_interrupt t "
        "WHERE invocation_id = %s",
    }
    with connection.cursor() as cursor:
        for name, sql in queries.items():
            cursor.execute(sql, [invocation_id])
            sizes[name] = int(cursor.fetchone()[0] or 0)
    return sizes


def _columns(model: Any) -> list[str]:
    return [f.column for f in model._meta.concrete_fields if not f.primary_key or f.column != "id"]


def seed(template: str, count: int) -> float:
    """Copy the waiting invocation `template` (its session, node runs, events and
    interrupt) `count` times in SQL; seconds taken."""
    from django.db import connection, transaction

    from workflows.models import Interrupt, Invocation, NodeRun, Session, SessionEvent

    begin = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE clones ON COMMIT DROP AS SELECT n, gen_random_uuid() AS inv, "
            "gen_random_uuid() AS ses FROM generate_series(1, %s) n",
            [count],
        )
        cursor.execute(
            "INSERT INTO workflows_session (id, created_by_id, created_at) "
            "SELECT ses, NULL, now() FROM clones"
        )
        inv_columns = [c for c in _columns(Invocation) if c not in ("id", "session_id")]
        cursor.execute(
            f"INSERT INTO workflows_invocation (id, session_id, {', '.join(inv_columns)}) "
            f"SELECT c.inv, c.ses, {', '.join('i.' + c for c in inv_columns)} "
            f"FROM clones c, workflows_invocation i WHERE i.id = %s",
            [template],
        )
        for model in (NodeRun, SessionEvent):
            columns = [c for c in _columns(model) if c not in ("id", "invocation_id")]
            table = model._meta.db_table
            cursor.execute(
                f"INSERT INTO {table} (invocation_id, {', '.join(columns)}) "
                f"SELECT c.inv, {', '.join('r.' + c for c in columns)} "
                f"FROM clones c, {table} r WHERE r.invocation_id = %s ORDER BY c.n, r.id",
                [template],
            )
        columns = [c for c in _columns(Interrupt) if c not in ("id", "invocation_id")]
        cursor.execute(
            f"INSERT INTO workflows_interrupt (id, invocation_id, {', '.join(columns)}) "
            f"SELECT r.id || ':' || c.n, c.inv, {', '.join('r.' + c for c in columns)} "
            f"FROM clones c, workflows_interrupt r WHERE r.invocation_id = %s",
            [template],
        )
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"ANALYZE {table}")
    assert Session.objects.count() >= count
    return time.perf_counter() - begin


def summary(samples: list[float]) -> dict[str, float]:
    """Median and p99 in ms of samples in seconds."""
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "n": len(samples),
    }


def phase_latency(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    setup(broker=False)
    from workflows.models import Invocation

    reset_database()
    results: dict[str, Any] = {}
    with tqdm(total=4, desc="scale: latency and size", unit="step") as bar:
        results["resume_empty"] = summary(resume_latencies(args.invocations))
        bar.update()
        before = stored_bytes()
        ids = [waiting_expense()[0] for _ in range(1000)]
        results["bytes_per_waiting"] = (stored_bytes() - before) / 1000
        results["row_bytes"] = row_bytes(ids[0])
        bar.update()
        results["seed_seconds"] = seed(ids[0], args.seed)
        results["seeded"] = args.seed
        results["waiting"] = Invocation.objects.filter(status="WAITING").count()
        bar.update()
        results["resume_seeded"] = summary(resume_latencies(args.invocations))
        bar.update()
    return results


def worker_command(index: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "hitl_site",
        "worker",
        "-P",
        "solo",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        os.environ.get("HITL_BENCH_WORKER_LOGLEVEL", "warning"),
        "-Q",
        QUEUE,
        "-n",
        f"perf{index}-{uuid.uuid4().hex[:6]}@%h",
    ]


@contextmanager
def celery_workers(count: int, label: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` worker processes on the bench's queue (purged first), ready (each has
    written its heartbeat) when the block starts (yielded), stopped when it ends."""
    from hitl_site.celery import app
    from workflows.models import Heartbeat

    app.control.purge()
    Heartbeat.objects.all().delete()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            worker_command(i),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(RESULTS / f"worker-{label}-{i}.log", "w"),  # noqa: SIM115
        )
        for i in range(count)
    ]
    try:
        deadline = time.monotonic() + 60
        while Heartbeat.objects.filter(kind="worker").count() < count:
            if time.monotonic() > deadline:
                raise TimeoutError("workers not ready")
            time.sleep(0.2)
        yield workers
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(30)


def phase_throughput(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    setup(broker=True)
    from workflows.models import Invocation, Session
    from workflows.registry import registry
    from workflows.tasks import run_invocation

    reset_database()
    definition = registry.get("expense_approval")
    results = {}
    for count in tqdm(args.workers, desc="scale: throughput", unit="config"):
        with celery_workers(count, str(count)):
            session = Session.objects.create()
            invocations = Invocation.objects.bulk_create(
                Invocation(
                    session=session,
                    workflow_name=definition.name,
                    workflow_version=definition.version,
                    input={"amount": AUTO_AMOUNT, "employee": f"e{i}", "purpose": "lunch"},
                )
                for i in range(args.throughput_invocations)
            )
            ids = [str(i.pk) for i in invocations]
            begin = time.perf_counter()
            for invocation_id in ids:
                run_invocation.apply_async(args=[invocation_id])
            published = time.perf_counter() - begin
            done = Invocation.objects.filter(pk__in=ids, status="COMPLETED")
            while done.count() < len(ids):
                if time.perf_counter() - begin > 300:
                    raise TimeoutError("invocations did not complete within 300 s")
                time.sleep(0.05)
            elapsed = time.perf_counter() - begin
            results[count] = {
                "invocations": len(ids),
                "seconds": elapsed,
                "per_second": len(ids) / elapsed,
                "publish_seconds": published,
            }
    return results


def reached(invocation_id: str, status: str, timeout: float = 30.0) -> float:
    """Poll the invocation's row every millisecond; perf_counter when it shows `status`."""
    from workflows.models import Invocation

    rows = Invocation.objects.filter(pk=invocation_id).values_list("status", flat=True)
    deadline = time.monotonic() + timeout
    while (found := rows.get()) != status:
        if found in ("FAILED", "CANCELLED") or time.monotonic() > deadline:
            raise RuntimeError(f"invocation {invocation_id} is {found}, waiting for {status}")
        time.sleep(POLL_SECONDS)
    return time.perf_counter()


def through_worker() -> dict[str, float]:
    """One expense that asks its manager, run by the worker: started, answered once it
    waits, until its row shows COMPLETED; seconds of each span."""
    from workflows import services
    from workflows.engine import FunctionResponse
    from workflows.models import Interrupt, Invocation

    invocation = services.start("expense_approval", {"amount": MANAGER_AMOUNT, "employee": "e"})
    started = time.perf_counter()
    waiting = reached(str(invocation.pk), "WAITING")
    question = Interrupt.objects.get(invocation_id=invocation.pk, status="pending")
    answer = [FunctionResponse(question.pk, "manager_approval", {"approved": True})]
    asked = time.perf_counter()
    services.submit_function_responses(answer)
    accepted = time.perf_counter()
    done = reached(str(invocation.pk), "COMPLETED")
    finished_at = Invocation.objects.values_list("finished_at", flat=True).get(pk=invocation.pk)
    resolved_at = Interrupt.objects.values_list("resolved_at", flat=True).get(pk=question.pk)
    return {
        "to_waiting": waiting - started,
        "submit": accepted - asked,
        "accepted_to_completed": done - accepted,
        "answer_to_completed": done - asked,
        "by_row_clocks": (finished_at - resolved_at).total_seconds(),
    }


def phase_worker(args: argparse.Namespace) -> dict[str, Any]:
    """End to end through a real worker, one invocation at a time; then the same answers
    run in this process (eager) for comparison."""
    from tqdm import tqdm

    setup(broker=True)
    from hitl_site.celery import app

    reset_database()
    spans: dict[str, list[float]] = {}
    with celery_workers(1, "e2e"):
        for _ in range(5):  # warm-up, not measured
            through_worker()
        for _ in tqdm(range(args.invocations), desc="scale: through a worker", unit="answer"):
            for key, seconds in through_worker().items():
                spans.setdefault(key, []).append(seconds)
    app.conf.task_always_eager = True
    results = {key: summary(samples) for key, samples in spans.items()}
    results["in_process"] = summary(resume_latencies(args.invocations))
    return results


PHASES = {"latency": phase_latency, "throughput": phase_throughput, "worker": phase_worker}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=100_000, help="waiting invocations seeded")
    parser.add_argument("--invocations", type=int, default=200, help="resumes timed per series")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--throughput-invocations", type=int, default=400)
    parser.add_argument("--write-docs", action="store_true", help="tables into docs/")
    parser.add_argument("--only", nargs="*", choices=list(PHASES), help="phases to run")
    parser.add_argument("--phase", choices=list(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        Path(args.out).write_text(json.dumps(PHASES[args.phase](args)))
        return 0
    ensure_databases([DATABASE])
    # Settings read the environment once: each phase in a process of its own.
    results: dict[str, Any] = {"load_average_start": os.getloadavg()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    # Throughput twice: as a project gets it (the worker keeps its database connections)
    # and with Celery's new connection for every task (HITL["WORKER_CONN_MAX_AGE"] = 0,
    # see bench/compare/settings.py). The end-to-end phase as a project gets it.
    runs = [("latency", "latency", ""), ("throughput", "throughput", "")]
    runs += [("throughput", "throughput_per_task", "0"), ("worker", "worker", "")]
    for phase, key, worker_conn_max_age in runs:
        if args.only and phase not in args.only:
            continue
        out = RESULTS / f"scale-{key}.json"
        command = [sys.executable, "-m", "bench.compare.scale", "--phase", phase, "--out", str(out)]
        command += ["--seed", str(args.seed), "--invocations", str(args.invocations)]
        command += ["--workers", *map(str, args.workers)]
        command += ["--throughput-invocations", str(args.throughput_invocations)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env["HITL_BENCH_WORKER_CONN_MAX_AGE"] = worker_conn_max_age
        subprocess.run(command, cwd=ROOT, check=True, env=env)
        results[key] = json.loads(out.read_text())
    results["load_average_end"] = os.getloadavg()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    final = RESULTS / f"scale-{stamp}.json"
    final.write_text(json.dumps(results, indent=1))
    from bench.compare.report import write_section
    from bench.compare.scale_report import plot_throughput, scale_tables

    tables = scale_tables(results)
    print(tables)
    print(f"results: {final}")
    if args.write_docs:
        write_section("scale", tables)
        plot_throughput(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
