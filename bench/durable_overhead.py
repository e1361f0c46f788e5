"""Durable runtime overhead: the engine on the Django store, and through a real worker.

Run from the repository root:

    python bench/durable_overhead.py                    # full run (a few minutes)
    python bench/durable_overhead.py --quick            # fewer repetitions, under a minute
    python bench/durable_overhead.py --backend sqlite   # sqlite | postgres | all (default)
    python bench/durable_overhead.py --profile          # + cProfile and SQL per transition

Sections (issue 3, "Performance"):
1. Per-node overhead of a 100-node chain of trivial nodes through
   `Runner(workflow, store=DjangoStore())`, every node transition committed before the next
   node starts; baseline: one bare `BEGIN; INSERT a small row; COMMIT` on the same database.
   Targets: at most 1.3 ms per node on PostgreSQL, at most 1 ms on SQLite.
2. Resume latency, engine side, no broker: a 10-node chain, a RequestInput node, one more
   node; 1,000 invocations started in one session, each resumed right after it waits (so the
   session's history grows through the series); first 50 against last 50.
   Target (PostgreSQL): at most 4 ms, and the last within 20% of the first.
3. End to end through a real `celery -A hitl_site worker` and Redis, on PostgreSQL: the demo
   workflow `expense_approval`, from `services.submit_function_responses` returning (answer
   accepted and committed) until the invocation row shows COMPLETED.
   Targets: p50 under 50 ms, p99 under 250 ms.

--profile adds, per database: cProfile of one 100-node run (caller and event-loop threads),
where that run's time goes (engine, thread hop, ORM Python, cursor.execute, COMMIT), its
SQL statements per node transition, every statement of one resume on both paths, and
interleaved experiments (no thread hop, synchronous_commit=off, InMemoryStore).

Services: PostgreSQL at $HITL_BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/hitl_bench, a scratch database: created when missing and,
as its name contains "bench", its workflow tables are emptied at the start of every run),
Redis at $HITL_BENCH_BROKER_URL (default redis://127.0.0.1:6379/15; the bench sends to, and
purges, a queue of its own, `hitl_bench`). SQLite runs on a temporary file with the
project's settings (WAL, synchronous=NORMAL, BEGIN IMMEDIATE). Settings read the
environment once, so each backend runs in a subprocess of this script (`--child`) with
DJANGO_SETTINGS_MODULE=hitl_site.settings, its DATABASE_URL (and CELERY_BROKER_URL for
section 3, so eager mode is off), and DEBUG=false (as in production: no query log).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import platform
import pstats
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATABASE_URL = os.environ.get(
    "HITL_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench"
)
BROKER_URL = os.environ.get("HITL_BENCH_BROKER_URL", "redis://127.0.0.1:6379/15")

CHAIN = 100  # nodes in the section-1 chain
RESUME_CHAIN = 10  # nodes before the interrupt in the section-2 workflow
NODE_TARGET_MS = {"postgresql": 1.3, "sqlite": 1.0}
RESUME_TARGET_MS = 4.0  # PostgreSQL
GROWTH_TARGET = 1.20
E2E_P50_MS, E2E_P99_MS = 50.0, 250.0
POLL_SECONDS = 0.001
QUEUE = "hitl_bench"  # the Celery queue of section 3
VENDOR_LABEL = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}


@dataclass(frozen=True)
class Plan:
    chain_runs: int  # timed runs of the 100-node chain (after one warm-up run)
    commits: int  # bare commits timed for the baseline
    resumes: int  # invocations in the resume series
    window: int  # first/last samples compared
    worker_resumes: int  # invocations in the worker-path series
    e2e: int  # invocations through the real worker
    e2e_baseline: int  # invocations resumed in-process for the section-3 baseline
    pairs: int  # paired resumes (new session / grown session)
    warm_up: int  # untimed start+resume cycles before the resume series

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls(5, 200, 150, 20, 40, 40, 10, 10, 10)
        return cls(15, 500, 1000, 50, 200, 200, 50, 50, 20)


# --- statistics and printing ----------------------------------------------------------


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


def med(samples: list[float]) -> float:
    return statistics.median(samples)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


Row = tuple[str, str, str, str, str, str, str]


def row(
    name: str,
    samples: list[float],
    baseline: float | None = None,
    ratio: str = "",
    target: str = "",
    result: str = "",
) -> Row:
    base = "" if baseline is None else f"{baseline:.3f}"
    if baseline and not ratio:
        ratio = f"{med(samples) / baseline:.1f}x"
    return (
        name,
        f"{med(samples):.3f}",
        f"{percentile(samples, 99):.3f}",
        base,
        ratio,
        target,
        result,
    )


def print_table(title: str, rows: list[Row]) -> None:
    print(title)
    header = ("measurement", "median ms", "p99 ms", "baseline ms", "ratio", "target", "result")
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for index, cells in enumerate(table):
        line = "  ".join(
            cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        )
        print("  " + line.rstrip())
        if index == 0:
            print("  " + "  ".join("-" * w for w in widths))
    print()


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def elapsed_ms(begin: int) -> float:
    return (time.perf_counter_ns() - begin) / 1e6


# --- machine header (parent) ----------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def postgres_facts() -> dict[str, str] | None:
    """Server version and durability settings; creates the scratch database if missing."""
    import dj_database_url
    import psycopg

    params = dj_database_url.parse(DATABASE_URL)
    conninfo = {
        "host": params["HOST"] or None,
        "port": params["PORT"] or None,
        "user": params["USER"] or None,
        "password": params["PASSWORD"] or None,
        "connect_timeout": 5,
    }
    try:
        with psycopg.connect(dbname="postgres", autocommit=True, **conninfo) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [params["NAME"]]
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{params["NAME"]}"')
        with psycopg.connect(dbname=params["NAME"], **conninfo) as conn:
            facts = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]
                for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method")
            }
    except psycopg.Error as exc:
        print(f"PostgreSQL at {DATABASE_URL} is unavailable: {exc}", file=sys.stderr)
        return None
    return facts


def redis_version() -> str | None:
    try:
        import redis

        return redis.Redis.from_url(BROKER_URL, socket_timeout=3).info("server")["redis_version"]
    except Exception as exc:  # any failure means: no broker for section 3
        print(f"Redis at {BROKER_URL} is unavailable: {exc}", file=sys.stderr)
        return None


# --- workflows ------------------------------------------------------------------------


def chain_workflow() -> Any:
    from bench.engine_overhead import chain_workflow as build
    from bench.engine_overhead import plain_functions

    return build(plain_functions(CHAIN))


def resume_workflow() -> Any:
    from bench.engine_overhead import resume_workflow as build

    return build(RESUME_CHAIN)


# --- child: Django setup ----------------------------------------------------------------


def setup_django() -> str:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    if connection.vendor == "postgresql" and "bench" in connection.settings_dict["NAME"]:
        # A scratch database (its name says so): start every run from empty workflow tables.
        from workflows.models import Interrupt, Invocation, NodeRun, Session, SessionEvent

        tables = ", ".join(
            connection.ops.quote_name(model._meta.db_table)
            for model in (SessionEvent, Interrupt, NodeRun, Invocation, Session)
        )
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    return connection.vendor


def database_facts() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(cursor.fetchone()[0], "?")
            return {
                "version": sqlite3.sqlite_version,
                "settings": f"journal_mode={journal}, synchronous={sync}, "
                f"BEGIN {connection.transaction_mode or 'DEFERRED'}",
            }
        cursor.execute("SHOW synchronous_commit")
        sync = cursor.fetchone()[0]
        cursor.execute("SHOW server_version")
        return {
            "version": cursor.fetchone()[0],
            "settings": f"synchronous_commit={sync}, psycopg {connection.Database.__version__}, "
            f"CONN_MAX_AGE={connection.settings_dict['CONN_MAX_AGE']}",
        }


@contextmanager
def counting_commits() -> Iterator[list[int]]:
    """Counts transactions committed on the default connection while active."""
    from django.db import connection

    calls = [0]
    original = connection.commit

    def commit() -> None:
        calls[0] += 1
        original()

    connection.commit = commit
    try:
        yield calls
    finally:
        del connection.commit


TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK")


def statements(captured: list[dict[str, str]], control: bool = False) -> list[str]:
    """Captured SQL; without BEGIN/COMMIT/ROLLBACK (logged unevenly by backend) unless
    `control`: transactions are counted on their own."""
    return [
        q["sql"]
        for q in captured
        if control or not q["sql"].lstrip().upper().startswith(TRANSACTION_CONTROL)
    ]


def sql_shape(sql: str) -> str:
    text = " ".join(sql.split())
    upper = text.upper()
    verb = upper.split(" ", 1)[0]
    match = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', text, re.IGNORECASE)
    shape = f"{verb} {match.group(1)}" if match else text[:60]
    if "ON CONFLICT" in upper:
        shape += " ... ON CONFLICT DO UPDATE"
    if verb == "SELECT" and "FOR UPDATE" in upper:
        shape += " ... FOR UPDATE"
    if verb == "SELECT" and upper.startswith("SELECT 1 AS"):
        shape += " (exists)"
    return shape


# --- child: section 1 -------------------------------------------------------------------


def bare_commits(count: int) -> list[float]:
    """Baseline: BEGIN; INSERT a small row; COMMIT, on the same connection, ms each."""
    from django.db import connection

    sqlite = connection.vendor == "sqlite"
    begin = f"BEGIN {connection.transaction_mode}" if sqlite else "BEGIN"
    key = "INTEGER PRIMARY KEY" if sqlite else "bigserial PRIMARY KEY"
    samples = []
    with connection.cursor() as cursor:
        # The bench's own table, in the scratch database.
        cursor.execute("DROP TABLE IF EXISTS hitl_bench_commit")
        cursor.execute(f"CREATE TABLE hitl_bench_commit (id {key}, note varchar(16))")
        for index in range(count + 20):
            begun = time.perf_counter_ns()
            cursor.execute(begin)
            cursor.execute("INSERT INTO hitl_bench_commit (note) VALUES ('bench')")
            cursor.execute("COMMIT")
            if index >= 20:  # the first 20 warm up
                samples.append(elapsed_ms(begun))
        cursor.execute("DROP TABLE hitl_bench_commit")
    return samples


def section_chain(plan: Plan) -> dict[str, Any]:
    from asgiref.sync import async_to_sync
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from workflows.engine import NodeStatus, Runner
    from workflows.store import DjangoStore

    runner = Runner(chain_workflow(), store=DjangoStore())
    run = async_to_sync(runner.run)
    run(0)  # warm-up, not measured
    samples = []
    for _ in range(plan.chain_runs):
        begun = time.perf_counter_ns()
        result = run(0)
        samples.append(elapsed_ms(begun) / CHAIN)
        assert result.status == NodeStatus.COMPLETED, result.error
        assert result.output == CHAIN, result.output
    # One more run, untimed, to count what a run sends to the database.
    with counting_commits() as commits, CaptureQueriesContext(connection) as captured:
        run(0)
    return {
        "per_node": samples,
        "commit": bare_commits(plan.commits),
        "statements_per_run": len(statements(captured.captured_queries)),
        "transactions_per_run": commits[0],
    }


# --- child: section 2 -------------------------------------------------------------------


def accept(responses: list[Any]) -> str:
    """What `services.submit_function_responses` does, minus the Celery enqueue."""
    from django.db import transaction
    from django.utils import timezone

    from workflows import services
    from workflows.engine.transitions import accept_responses

    db = services.store()
    with transaction.atomic():
        interrupts = db.load_interrupts_sync([r.id for r in responses], lock=True)
        acceptance = accept_responses(responses, interrupts, now=timezone.now())
        db.commit_sync(acceptance.batch)
    return acceptance.invocation_id


def pending_interrupt(invocation_id: Any) -> str:
    from workflows.engine import InterruptStatus
    from workflows.models import Interrupt

    return (
        Interrupt.objects.filter(invocation_id=invocation_id, status=InterruptStatus.PENDING)
        .values_list("id", flat=True)
        .get()
    )


def invocation_status(invocation_id: Any) -> str:
    from workflows.models import Invocation

    return Invocation.objects.filter(pk=invocation_id).values_list("status", flat=True).get()


def section_resume(plan: Plan) -> dict[str, Any]:
    from asgiref.sync import async_to_sync

    from workflows import services
    from workflows.engine import FunctionResponse, NodeStatus, Runner
    from workflows.models import Session
    from workflows.registry import registry
    from workflows.store import DjangoStore

    workflow = resume_workflow()
    runner = Runner(workflow, store=DjangoStore())
    run, advance = async_to_sync(runner.run), async_to_sync(runner.advance)

    def cycle(session_id: str) -> tuple[float, float]:
        begun = time.perf_counter_ns()
        started = run(0, session_id=session_id)
        start_ms = elapsed_ms(begun)
        assert started.status == NodeStatus.WAITING, started.status
        (interrupt_id,) = started.interrupts
        accept([FunctionResponse(interrupt_id, "ask", {"ok": True})])
        # Answer accepted (committed) -> invocation completed, the engine side.
        begun = time.perf_counter_ns()
        advance(started.invocation_id)
        resume_ms = elapsed_ms(begun)
        assert invocation_status(started.invocation_id) == NodeStatus.COMPLETED
        return start_ms, resume_ms

    warm_up = str(Session.objects.create().pk)
    for _ in range(plan.warm_up):
        cycle(warm_up)
    session_id = str(Session.objects.create().pk)
    starts, resumes = [], []
    for index in range(plan.resumes):
        start_ms, resume_ms = cycle(session_id)
        starts.append(start_ms)
        resumes.append(resume_ms)
        if (index + 1) % 250 == 0:
            progress(f"resume {index + 1}/{plan.resumes}")

    # Paired: a resume in a brand-new session and one in the session above, back to back
    # in alternating order, so machine noise hits both alike.
    paired: dict[str, list[float]] = {"new": [], "grown": []}
    for index in range(plan.pairs):
        order = [("new", None), ("grown", session_id)]
        for key, sid in order if index % 2 else order[::-1]:
            paired[key].append(cycle(sid or str(Session.objects.create().pk))[1])

    # The worker's own path, in this process: accept (as submit_function_responses does, no
    # enqueue), then services.execute (what the Celery task runs: Runner.advance, no result).
    registry.register(workflow)
    session = Session.objects.create()
    worker, accepts = [], []
    for _ in range(plan.worker_resumes):
        invocation = services.start(workflow.name, 0, session=session)  # eager: to WAITING
        response = [FunctionResponse(pending_interrupt(invocation.pk), "ask", {"ok": True})]
        begun = time.perf_counter_ns()
        invocation_id = accept(response)
        accepted = time.perf_counter_ns()
        services.execute(invocation_id)
        worker.append(elapsed_ms(begun))
        accepts.append((accepted - begun) / 1e6)
        assert invocation_status(invocation_id) == NodeStatus.COMPLETED
    return {
        "start": starts,
        "resume": resumes,
        "paired_new": paired["new"],
        "paired_grown": paired["grown"],
        "worker": worker,
        "worker_accept": accepts,
    }


# --- child: profile (--profile) -------------------------------------------------------


class StoreTimer:
    """Times every DjangoStore call while active: awaited time (with the thread hop),
    time inside the call, inside cursor.execute, and inside COMMIT."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []  # (method, awaited ms)
        self.awaited = self.inside = self.execute = self.commit = self.commits = 0

    @contextmanager
    def active(self) -> Iterator[StoreTimer]:
        from django.db import connection

        import workflows.store as store_module

        original_hop = store_module._in_caller_thread
        original_commit = connection.commit

        async def timed_hop(func: Any, *args: Any) -> Any:
            def inner() -> Any:
                begun = time.perf_counter_ns()
                try:
                    return func(*args)
                finally:
                    self.inside += time.perf_counter_ns() - begun

            begun = time.perf_counter_ns()
            try:
                return await original_hop(inner)
            finally:
                took = time.perf_counter_ns() - begun
                self.awaited += took
                self.calls.append((func.__name__.removesuffix("_sync"), took / 1e6))

        def timed_execute(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            begun = time.perf_counter_ns()
            try:
                return execute(sql, params, many, context)
            finally:
                self.execute += time.perf_counter_ns() - begun

        def timed_commit() -> None:
            begun = time.perf_counter_ns()
            try:
                original_commit()
            finally:
                self.commit += time.perf_counter_ns() - begun
                self.commits += 1

        store_module._in_caller_thread = timed_hop
        connection.commit = timed_commit
        try:
            with connection.execute_wrapper(timed_execute):
                yield self
        finally:
            store_module._in_caller_thread = original_hop
            del connection.commit


def profile_hot_path() -> str:
    from asgiref.sync import async_to_sync
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import workflows.store as store_module
    from workflows import services
    from workflows.engine import FunctionResponse, InMemoryStore, NodeStatus, Runner
    from workflows.models import Session
    from workflows.registry import registry
    from workflows.store import DjangoStore

    out = io.StringIO()
    label = VENDOR_LABEL[connection.vendor]
    workflow = chain_workflow()
    runner = Runner(workflow, store=DjangoStore())
    run = async_to_sync(runner.run)
    run(0)

    # cProfile: the engine's coroutines run on async_to_sync's loop thread, the store's
    # database work on this (the caller's) thread; one profiler on each.
    loop_profile, caller_profile = cProfile.Profile(), cProfile.Profile()

    async def profiled() -> Any:
        loop_profile.enable()
        try:
            return await runner.run(0)
        finally:
            loop_profile.disable()

    caller_profile.enable()
    async_to_sync(profiled)()
    caller_profile.disable()
    for title, profile in (
        ("caller thread (store / ORM / driver)", caller_profile),
        ("event-loop thread (engine; coroutine resumptions count as calls)", loop_profile),
    ):
        buffer = io.StringIO()
        stats = pstats.Stats(profile, stream=buffer).strip_dirs().sort_stats("cumulative")
        stats.print_stats(20)
        body = buffer.getvalue()
        body = body[body.find("   ncalls") :].rstrip()
        print(f"\n[{label}] cProfile of one {CHAIN}-node run, {title}:", file=out)
        print(body, file=out)

    # Where one run's time goes, and the SQL it sends.
    with CaptureQueriesContext(connection) as captured, StoreTimer().active() as timer:
        begun = time.perf_counter_ns()
        run(0)
        wall = time.perf_counter_ns() - begun
    sql = statements(captured.captured_queries)
    split = [
        ("engine + asyncio (outside store calls)", wall - timer.awaited),
        ("thread hop (sync_to_async, per store call)", timer.awaited - timer.inside),
        ("store Python: ORM, model rows, JSON", timer.inside - timer.execute - timer.commit),
        ("cursor.execute (driver + round trip + server)", timer.execute),
        ("COMMIT (round trip + WAL flush)", timer.commit),
    ]
    print(f"\n[{label}] where one {CHAIN}-node run's time goes, ms per node:", file=out)
    for name, ns in split:
        print(f"  {name:48} {ns / 1e6 / CHAIN:6.3f}  ({ns / wall:4.0%})", file=out)
    print(f"  {'total':48} {wall / 1e6 / CHAIN:6.3f}", file=out)
    print(
        f"\n[{label}] SQL of one {CHAIN}-node run: {len(sql)} statements in {timer.commits} "
        f"transactions ({len(sql) / CHAIN:.2f} statements + {timer.commits / CHAIN:.2f} "
        f"COMMIT per node; {len(timer.calls)} store calls):",
        file=out,
    )
    for shape, count in Counter(sql_shape(s) for s in sql).most_common():
        print(f"  {count:5d}  {count / CHAIN:5.2f}/node  {shape}", file=out)

    # One resume: store calls with their awaited time, and every statement.
    resume_runner = Runner(resume_workflow(), store=DjangoStore())
    registry.register(resume_runner.workflow)
    session_id = str(Session.objects.create().pk)
    for title in ("Runner.resume (returns the full result)", "accept + services.execute"):
        if title.startswith("Runner"):
            started = async_to_sync(resume_runner.run)(0, session_id=session_id)
            (interrupt_id,) = started.interrupts
        else:  # as the worker finds it: started by services (pinned definition version)
            invocation = services.start(resume_runner.workflow.name, 0)  # eager: to WAITING
            interrupt_id = pending_interrupt(invocation.pk)
        response = [FunctionResponse(interrupt_id, "ask", {"ok": True})]
        with CaptureQueriesContext(connection) as captured, StoreTimer().active() as timer:
            begun = time.perf_counter_ns()
            if title.startswith("Runner"):
                async_to_sync(resume_runner.resume)(response)
            else:
                services.execute(accept(response))
            wall = time.perf_counter_ns() - begun
        sql = statements(captured.captured_queries)
        print(
            f"\n[{label}] one resume via {title}: {wall / 1e6:.2f} ms, {len(sql)} statements "
            f"in {timer.commits} transactions",
            file=out,
        )
        if timer.calls:
            print(
                "  store calls (ms awaited, thread hop included): "
                + ", ".join(f"{name} {took:.2f}" for name, took in timer.calls),
                file=out,
            )
        for statement in statements(captured.captured_queries, control=True):
            text = " ".join(statement.split())
            print(f"  {sql_shape(statement):52.52}  {text[:100]}", file=out)

    # Diagnostic experiments (not how the product runs), interleaved round by round so a
    # noisy stretch of the machine hits every variant alike.
    async def inline(func: Any, *args: Any) -> Any:
        return func(*args)

    def shipped() -> None:
        run(0)

    def no_hop() -> None:
        original_hop = store_module._in_caller_thread
        store_module._in_caller_thread = inline
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        try:
            asyncio.run(runner.run(0))  # this thread: the same connection, no hop
        finally:
            store_module._in_caller_thread = original_hop
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]

    def async_commit() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")
        try:
            run(0)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET synchronous_commit")

    memory_run = async_to_sync(Runner(workflow, store=InMemoryStore()).run)

    def in_memory() -> None:
        memory_run(0)

    variants: list[tuple[str, Callable[[], None]]] = [
        ("as shipped", shipped),
        ("store calls inline on the loop thread (no hop)", no_hop),
    ]
    if connection.vendor == "postgresql":
        variants.append(("synchronous_commit=off (commits not durable)", async_commit))
    variants.append(("InMemoryStore (engine alone, no database)", in_memory))
    samples: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(7):
        for name, variant in variants:
            begun = time.perf_counter_ns()
            variant()
            samples[name].append(elapsed_ms(begun) / CHAIN)
    print(
        f"\n[{label}] diagnostic experiments, {CHAIN}-node chain, median ms per node of 7 "
        "interleaved rounds:",
        file=out,
    )
    for name, values in samples.items():
        print(f"  {name:48} {med(values):6.3f}", file=out)
    result = run(0)
    assert result.status == NodeStatus.COMPLETED
    return out.getvalue()


# --- child: section 3 -------------------------------------------------------------------


class Worker:
    """A `celery -A hitl_site worker` subprocess of this child."""

    def __init__(self) -> None:
        self.tail: deque[str] = deque(maxlen=60)
        self.ready = threading.Event()
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "hitl_site",
            "worker",
            "--pool",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
            "--hostname",
            f"hitl-bench-{os.getpid()}@%h",
            "--queues",
            QUEUE,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, "LOG_LEVEL": "INFO"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.tail.append(line.rstrip())
            if " ready." in line:
                self.ready.set()
        self.ready.set()  # the worker exited

    def wait_ready(self, timeout: float = 60.0) -> None:
        if not self.ready.wait(timeout) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError("celery worker did not start:\n" + "\n".join(self.tail))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # warm shutdown
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(invocation_id: Any, wanted: str, timeout: float = 30.0) -> int:
    """Poll the invocation row every POLL_SECONDS; perf_counter_ns when it shows `wanted`."""
    from workflows.engine import NodeStatus
    from workflows.models import Invocation

    rows = Invocation.objects.filter(pk=invocation_id).values_list("status", flat=True)
    deadline = time.monotonic() + timeout
    while True:
        status = rows.get()
        if status == wanted:
            return time.perf_counter_ns()
        if status in (NodeStatus.FAILED, NodeStatus.CANCELLED) or time.monotonic() > deadline:
            raise RuntimeError(f"invocation {invocation_id} is {status}, waiting for {wanted}")
        time.sleep(POLL_SECONDS)


def section_e2e(plan: Plan) -> dict[str, Any]:
    from django.conf import settings

    from hitl_site.celery import app
    from workflows import services
    from workflows.engine import FunctionResponse, NodeStatus
    from workflows.models import Interrupt, Invocation

    assert not settings.CELERY_TASK_ALWAYS_EAGER, "the bench process must not run tasks eagerly"
    # A queue of the bench's own, so no other consumer of the broker takes its tasks and the
    # purge (of tasks left by an interrupted bench) touches nothing else.
    app.conf.task_default_queue = QUEUE
    app.control.purge()
    worker = Worker()
    try:
        worker.wait_ready()
        answer = {"approved": True, "comment": "bench"}
        node_input = {"amount": 250.0, "employee": "bench"}

        def started() -> tuple[Any, float]:
            invocation = services.start("expense_approval", node_input)
            begun = time.perf_counter_ns()
            waiting = wait_for(invocation.pk, NodeStatus.WAITING)
            return invocation.pk, (waiting - begun) / 1e6

        def cycle() -> dict[str, float]:
            invocation_id, to_waiting = started()
            response = [
                FunctionResponse(pending_interrupt(invocation_id), "manager_approval", answer)
            ]
            begun = time.perf_counter_ns()
            services.submit_function_responses(response)
            accepted = time.perf_counter_ns()
            done = wait_for(invocation_id, NodeStatus.COMPLETED)
            finished_at = Invocation.objects.values_list("finished_at", flat=True).get(
                pk=invocation_id
            )
            resolved_at = Interrupt.objects.values_list("resolved_at", flat=True).get(
                pk=response[0].id
            )
            return {
                "e2e": (done - accepted) / 1e6,
                "submit": (accepted - begun) / 1e6,
                "to_waiting": to_waiting,
                "db_clock": (finished_at - resolved_at).total_seconds() * 1e3,
            }

        for _ in range(5):  # warm-up, not measured
            cycle()
        samples: dict[str, list[float]] = {}
        for index in range(plan.e2e):
            for key, value in cycle().items():
                samples.setdefault(key, []).append(value)
            if (index + 1) % 100 == 0:
                progress(f"end to end {index + 1}/{plan.e2e}")

        # Baseline: the same resume without broker or worker: accept here (no enqueue,
        # so the worker gets no task), then run the task's body in this process.
        samples["in_process"] = []
        for _ in range(plan.e2e_baseline):
            invocation_id, _ = started()
            invocation_id = accept(
                [FunctionResponse(pending_interrupt(invocation_id), "manager_approval", answer)]
            )
            begun = time.perf_counter_ns()
            services.execute(invocation_id)
            samples["in_process"].append(elapsed_ms(begun))
            assert invocation_status(invocation_id) == NodeStatus.COMPLETED
        return samples
    finally:
        worker.stop()


# --- child entry point ----------------------------------------------------------------


def child(kind: str, plan: Plan, profile: bool, out: Path) -> None:
    vendor = setup_django()
    results: dict[str, Any] = {"vendor": vendor, "facts": database_facts()}
    label = f"[{kind}]"
    if kind == "e2e":
        progress(f"{label} end to end through celery worker + Redis")
        results["e2e"] = section_e2e(plan)
    else:
        progress(f"{label} {CHAIN}-node chain")
        results["chain"] = section_chain(plan)
        progress(f"{label} resume series")
        results["resume"] = section_resume(plan)
        if profile:
            progress(f"{label} profile")
            results["profile"] = profile_hot_path()
    out.write_text(json.dumps(results))


def run_child(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any] | None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "SQLITE_PATH")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="hitl_site.settings",
        DEBUG="false",
        LOG_LEVEL=os.environ.get("LOG_LEVEL", "WARNING"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    if kind == "sqlite":
        env["SQLITE_PATH"] = str(workdir / "bench.sqlite3")
    else:
        env["DATABASE_URL"] = DATABASE_URL
    if kind == "e2e":
        env["CELERY_BROKER_URL"] = BROKER_URL
    out = workdir / f"{kind}.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--out", str(out)]
    command += ["--quick"] * args.quick + ["--profile"] * args.profile
    completed = subprocess.run(command, cwd=ROOT, env=env, check=False)
    if completed.returncode != 0:
        print(f"!! {kind} child failed with exit code {completed.returncode}", file=sys.stderr)
        return None
    return json.loads(out.read_text())


# --- report ---------------------------------------------------------------------------


def report(results: dict[str, dict[str, Any]], plan: Plan) -> bool:
    """Print the three tables; True when every target is met."""
    met = True
    backends = [k for k in ("postgres", "sqlite") if results.get(k)]

    rows: list[Row] = []
    for kind in backends:
        data = results[kind]
        vendor, chain = data["vendor"], data["chain"]
        name, target = VENDOR_LABEL[vendor], NODE_TARGET_MS[vendor]
        ok = med(chain["per_node"]) <= target
        met &= ok
        commit = med(chain["commit"])
        rows.append(
            row(
                f"{name}: per node, {CHAIN}-node chain",
                chain["per_node"],
                commit,
                target=f"<= {target} ms",
                result=verdict(ok),
            )
        )
        rows.append(row(f"{name}: bare commit (BEGIN; INSERT; COMMIT)", chain["commit"]))
    if rows:
        print_table("1. Per-node overhead (Runner + DjangoStore, async_to_sync(runner.run))", rows)

    rows = []
    window = plan.window
    for kind in backends:
        data = results[kind]
        vendor, resume = data["vendor"], data["resume"]
        name = VENDOR_LABEL[vendor]
        absolute = vendor == "postgresql"  # the 4 ms target is PostgreSQL's
        limit = f"<= {RESUME_TARGET_MS:g} ms" if absolute else ""
        samples = resume["resume"]
        first, last = samples[:window], samples[-window:]
        growth = med(last) / med(first)
        first_ok = med(first) <= RESUME_TARGET_MS or not absolute
        last_ok = growth <= GROWTH_TARGET and (med(last) <= RESUME_TARGET_MS or not absolute)
        met &= first_ok and last_ok
        rows.append(
            row(
                f"{name}: accepted -> COMPLETED, first {window}",
                first,
                target=limit,
                result=verdict(first_ok) if absolute else "",
            )
        )
        rows.append(
            row(
                f"{name}: accepted -> COMPLETED, last {window} (of {len(samples):,})",
                last,
                baseline=med(first),
                ratio=f"{growth:.2f}",
                target=", ".join(filter(None, [limit, f"ratio <= {GROWTH_TARGET:.2f}"])),
                result=verdict(last_ok),
            )
        )
        new, grown = resume["paired_new"], resume["paired_grown"]
        rows.append(row(f"{name}: accepted -> COMPLETED, paired: new session", new, target="info"))
        rows.append(
            row(
                f"{name}: accepted -> COMPLETED, paired: session of {len(samples):,}",
                grown,
                baseline=med(new),
                ratio=f"{med(grown) / med(new):.2f}",
                target="info",
            )
        )
        worker = resume["worker"]
        first, last = worker[:window], worker[-window:]
        rows.append(row(f"{name}: accept+execute, first {window}", first, target="info"))
        rows.append(
            row(
                f"{name}: accept+execute, last {window} (of {len(worker):,})",
                last,
                baseline=med(first),
                ratio=f"{med(last) / med(first):.2f}",
                target="info",
            )
        )
    if rows:
        print_table(
            "2. Resume latency, engine side, no broker (1 session; start+resume one at a time)",
            rows,
        )

    e2e = (results.get("e2e") or {}).get("e2e")
    if e2e:
        p50, p99 = med(e2e["e2e"]), percentile(e2e["e2e"], 99)
        base = med(e2e["in_process"])
        ok50, ok99 = p50 < E2E_P50_MS, p99 < E2E_P99_MS
        met &= ok50 and ok99
        rows = [
            row(
                "answer accepted -> COMPLETED (poll 1 ms)",
                e2e["e2e"],
                base,
                target=f"p50 < {E2E_P50_MS:g}, p99 < {E2E_P99_MS:g}",
                result=f"{verdict(ok50)}, {verdict(ok99)}",
            ),
            row(
                "  same, DB clocks: finished_at - resolved_at", e2e["db_clock"], base, target="info"
            ),
            row("  baseline: services.execute in-process", e2e["in_process"], target="info"),
            row("submit_function_responses call", e2e["submit"], target="info"),
            row("start() returned -> WAITING", e2e["to_waiting"], target="info"),
        ]
        print_table(
            f"3. End to end, celery worker (solo) + Redis + PostgreSQL, expense_approval, "
            f"{len(e2e['e2e'])} invocations one at a time",
            rows,
        )
    return met


def notes(results: dict[str, dict[str, Any]], plan: Plan) -> None:
    print("Notes:")

    def say(text: str) -> None:
        """Wrap a note: "- item" at the margin, "  sub-item" indented."""
        indent = "  " if text.startswith("  ") else ""
        wrapped = textwrap.fill(
            text.strip(), 100, initial_indent=indent, subsequent_indent=indent + "  "
        )
        print(wrapped)

    if not (results.get("postgres") or results.get("sqlite")):
        return _notes_e2e(results, say)
    say(
        f"- 1: per node = wall time of async_to_sync(runner.run)(0) / {CHAIN} (includes the "
        "invocation insert, lease, every checkpoint commit and loading the result); median "
        f"and p99 of {plan.chain_runs} runs after 1 warm-up. Baseline = median bare commit "
        f"({plan.commits} samples, raw SQL on the same connection); ratio = per node / commit."
    )
    for kind in ("postgres", "sqlite"):
        chain = (results.get(kind) or {}).get("chain")
        if chain:
            vendor = VENDOR_LABEL[results[kind]["vendor"]]
            say(
                f"  {vendor}: one run sends {chain['statements_per_run']} SQL statements in "
                f"{chain['transactions_per_run']} transactions = "
                f"{chain['statements_per_run'] / CHAIN:.2f} statements and "
                f"{chain['transactions_per_run'] / CHAIN:.2f} commits per node "
                "(BEGIN/COMMIT not counted)."
            )
    say(
        f"- 2: workflow = {RESUME_CHAIN}-node chain -> RequestInput node -> 1 node. Each "
        "invocation is started (Runner.run, session_id of one Session row) and resumed at "
        f"once, so the session holds 0 ... n-1 earlier invocations; {plan.warm_up} untimed "
        "warm-up cycles in another session first."
    )
    say(
        "  accepted -> COMPLETED = the answer is accepted first (locked interrupt load, "
        "accept_responses, one commit, untimed), then async_to_sync(runner.advance)"
        "(invocation_id) is timed: take the lease with the checkpoint, run the resumed node "
        "and the one after it (two durable commits), give the lease back."
    )
    say(
        f"  paired (info): {plan.pairs} pairs after the series, each a start+resume in a "
        "brand-new session and one in the series' session, back to back in alternating "
        "order (robust to a noisy machine); ratio = grown / new."
    )
    say(
        "  accept+execute (info) = the worker's path in-process: what "
        "services.submit_function_responses does minus the Celery enqueue (locked interrupt "
        "load, accept_responses, DjangoStore.commit_sync), then services.execute "
        "(delivery counter, registry lookup, Runner.advance; no result load); invocations "
        "started by services.start (eager) in a session of their own."
    )
    for kind in ("postgres", "sqlite"):
        resume = (results.get(kind) or {}).get("resume")
        if resume:
            vendor = VENDOR_LABEL[results[kind]["vendor"]]
            say(
                f"  {vendor}: 1st resume {resume['resume'][0]:.3f} ms, "
                f"{len(resume['resume']):,}th {resume['resume'][-1]:.3f} ms; start to WAITING "
                f"median {med(resume['start']):.3f} ms; accept step alone median "
                f"{med(resume['worker_accept']):.3f} ms."
            )
    _notes_e2e(results, say)


def _notes_e2e(results: dict[str, dict[str, Any]], say: Callable[[str], None]) -> None:
    if results.get("e2e"):
        say(
            "- 3: t0 = services.submit_function_responses returned (answer committed, run task "
            "published on commit); t1 = first poll of the invocation row (every 1 ms) that "
            "shows COMPLETED. Baseline = services.execute for the same workflow in the bench "
            "process after an accept without enqueue (no broker, no worker); ratio = e2e / "
            "baseline. The bench process runs with CELERY_BROKER_URL set (eager mode off)."
        )


def header(pg: dict[str, str] | None, redis: str | None, kinds: list[str], backend: str) -> None:
    import celery
    import django

    print(
        f"machine: {platform.platform()} | CPU: {cpu_model()} | cores: {os.cpu_count()} | "
        f"Python {platform.python_version()} ({platform.python_implementation()})"
    )
    unused = "not used" if backend == "sqlite" else "unavailable"
    pg_text = (
        f"PostgreSQL {pg['server_version']} (synchronous_commit={pg['synchronous_commit']}, "
        f"fsync={pg['fsync']}, wal_sync_method={pg['wal_sync_method']}) at {DATABASE_URL}"
        if pg
        else f"PostgreSQL {unused}"
    )
    redis_text = f"Redis {redis} at {BROKER_URL}" if redis else f"Redis {unused}"
    print(
        f"{pg_text} | SQLite {sqlite3.sqlite_version} | {redis_text} | "
        f"Django {django.get_version()}, Celery {celery.__version__}"
    )
    print(f"runs: {', '.join(kinds) or 'none'}; DEBUG=false in every process")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one run and list SQL per transition"
    )
    parser.add_argument("--child", choices=["sqlite", "postgres", "e2e"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    plan = Plan.make(args.quick)
    if args.child:
        child(args.child, plan, args.profile, args.out)
        return 0

    began = time.perf_counter()
    pg = postgres_facts() if args.backend in ("postgres", "all") else None
    redis = redis_version() if args.backend in ("postgres", "all") else None
    kinds = []
    if args.backend in ("sqlite", "all"):
        kinds.append("sqlite")
    if pg:
        kinds.append("postgres")
        if redis:
            kinds.append("e2e")
    header(pg, redis, kinds, args.backend)
    workdir = Path(tempfile.mkdtemp(prefix="hitl-bench-"))
    try:
        results = {kind: run_child(kind, args, workdir) for kind in kinds}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for kind, data in results.items():
        if data and kind != "e2e":
            facts = data["facts"]
            print(f"{VENDOR_LABEL[data['vendor']]} {facts['version']}: {facts['settings']}")
    print()
    if not any(results.values()):
        print("nothing measured")
        return 1
    met = report(results, plan)
    notes(results, plan)
    for kind in ("postgres", "sqlite"):
        text = (results.get(kind) or {}).get("profile")
        if text:
            print(text)
    missing = [kind for kind in kinds if results.get(kind) is None]
    wanted = {"sqlite": ["sqlite"], "postgres": ["postgres", "e2e"]}
    expected = [k for b, ks in wanted.items() if args.backend in (b, "all") for k in ks]
    skipped = [kind for kind in expected if kind not in kinds]
    print(
        f"\ntotal bench time {time.perf_counter() - began:.1f} s; "
        f"targets {'all met' if met else 'MISSED'}"
        + ("" if met or args.profile else " (run with --profile for the hot path)")
        + (f"; failed: {', '.join(missing)}" if missing else "")
        + (f"; skipped (service unavailable): {', '.join(skipped)}" if skipped else "")
    )
    return 1 if missing or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
