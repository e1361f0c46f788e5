"""Where this project's time goes on SQLite and PostgreSQL (`make bench-profile`).

    python -m bench.compare.profile                    # SQLite and PostgreSQL
    python -m bench.compare.profile --systems prepared # rows of bench/compare/run.py

Each database runs in a process of its own (bench/compare/worker.py, as in the
comparison), warmed up, then reports: cProfile of a 100-node chain run as shipped
(`services.start`, Celery eager: the run executes in this thread on an inline store); how
that run's time splits between the store's calls, COMMIT and everything else; its SQL
statements per node transition; every store call and statement of one resume
(`services.submit_function_responses`); and interleaved experiments (the engine's Runner
with a thread hop per store call, `synchronous_commit=off`, the same chain in memory).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CHAIN = 100
ROUNDS = 7  # of the interleaved experiments


def sql_shape(sql: str) -> str:
    """A statement by what it does: verb and table, and the clauses that matter."""
    text = " ".join(sql.split())
    upper = text.upper()
    verb = upper.split(" ", 1)[0]
    match = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', text, re.IGNORECASE)
    shape = f"{verb} {match.group(1)}" if match else text[:60]
    if "ON CONFLICT" in upper:
        shape += " ... ON CONFLICT"
    if verb == "SELECT" and "FOR UPDATE" in upper:
        shape += " ... FOR UPDATE"
    return shape


@contextmanager
def recorded_statements(system: Any) -> Iterator[list[str]]:
    """Every statement sent on this process's connections while active: SQLite's trace
    hook, psycopg's Cursor.execute on PostgreSQL (Django's cursors and the store's own)."""
    found: list[str] = []
    if system.backend == "sqlite":
        system.counter.statements = found
        try:
            yield found
        finally:
            system.counter.statements = None
        return
    import psycopg

    execute = psycopg.Cursor.execute

    def recording(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        found.append(query if isinstance(query, str) else repr(query))
        return execute(cursor, query, *args, **kwargs)

    psycopg.Cursor.execute = recording
    try:
        yield found
    finally:
        psycopg.Cursor.execute = execute


class StoreTimer:
    """Times DjangoStore's synchronous calls (the outermost, in this thread) and the
    explicit COMMITs inside them while active: the store's share of a run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []  # (method, seconds)
        self.store = self.commit_in_store = 0.0  # seconds
        self.commits = 0  # explicit COMMITs inside store calls
        self._depth = 0
        self._thread = threading.get_ident()

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(store: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._thread:  # the lease keep-alive thread
                return method(store, *args, **kwargs)
            self._depth += 1
            begun = time.perf_counter()
            try:
                return method(store, *args, **kwargs)
            finally:
                self._depth -= 1
                if not self._depth:
                    took = time.perf_counter() - begun
                    self.store += took
                    self.calls.append((name.removesuffix("_sync"), took))

        return timed

    @contextmanager
    def active(self) -> Iterator[StoreTimer]:
        from django.db import connection

        from workflows.store import DjangoStore

        # Its public synchronous methods, found by name (with those it inherits).
        names = [n for n in dir(DjangoStore) if n.endswith("_sync") and not n.startswith("_")]
        own = {name: DjangoStore.__dict__.get(name) for name in names}
        commit = connection.commit

        def timed_commit() -> None:
            begun = time.perf_counter()
            try:
                commit()
            finally:
                if self._depth:
                    self.commit_in_store += time.perf_counter() - begun
                    self.commits += 1

        for name in names:
            setattr(DjangoStore, name, self._timed(name, getattr(DjangoStore, name)))
        connection.commit = timed_commit
        try:
            yield self
        finally:
            for name, method in own.items():
                if method is None:
                    delattr(DjangoStore, name)  # inherited: found on the base class again
                else:
                    setattr(DjangoStore, name, method)
            del connection.commit


def cprofile(system: Any) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    system.chain(CHAIN)
    profiler.disable()
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats("cumulative").print_stats(25)
    body = buffer.getvalue()
    return body[body.find("   ncalls") :].rstrip()


def chain_split(system: Any) -> list[str]:
    before = system.commits()
    with recorded_statements(system) as sql, StoreTimer().active() as timer:
        begun = time.perf_counter()
        system.chain(CHAIN)
        wall = time.perf_counter() - begun
    committed = system.commits() - before
    split = [
        ("outside the store: engine, services, Celery eager", wall - timer.store),
        ("store calls: statements, driver, rows", timer.store),
        (f"  of them explicit COMMITs ({timer.commits})", timer.commit_in_store),
    ]
    lines = [f"where one {CHAIN}-node run's time goes, ms per node:"]
    lines += [f"  {name:52} {s * 1e3 / CHAIN:6.3f}  ({s / wall:4.0%})" for name, s in split]
    lines.append(f"  {'total':52} {wall * 1e3 / CHAIN:6.3f}")
    statements = [s for s in sql if not s.lstrip().upper().startswith(("BEGIN", "COMMIT"))]
    lines.append(
        f"its SQL: {len(statements)} statements besides BEGIN/COMMIT in {len(timer.calls)} "
        f"store calls; {committed} transactions committed, as the database counts them "
        "(on PostgreSQL a one-statement step commits by itself):"
    )
    for shape, count in Counter(sql_shape(s) for s in statements).most_common():
        lines.append(f"  {count:5d}  {count / CHAIN:5.2f}/node  {shape}")
    return lines


def one_resume(system: Any) -> list[str]:
    invocation_id = system.start("chain_interrupt", 0)
    (interrupt_id,) = system.pending(invocation_id, "chain_interrupt")
    before = system.commits()
    with recorded_statements(system) as sql, StoreTimer().active() as timer:
        begun = time.perf_counter()
        system.answer("chain_interrupt", interrupt_id, {"ok": True})
        wall = time.perf_counter() - begun
    lines = [
        f"one resume (submit_function_responses, eager): {wall * 1e3:.2f} ms, "
        f"{len(sql)} statements, {system.commits() - before} transactions committed",
        "  store calls (ms): " + ", ".join(f"{n} {s * 1e3:.2f}" for n, s in timer.calls),
    ]
    lines += [f"  {sql_shape(s):44.44}  {' '.join(s.split())[:90]}" for s in sql]
    return lines


def experiments(system: Any) -> list[str]:
    """Diagnostics, not how the project runs, interleaved round by round so a noisy
    stretch of the machine hits every variant alike."""
    from asgiref.sync import async_to_sync
    from django.db import connection

    from bench.compare.systems.hitl import WORKFLOWS
    from workflows.engine import InMemoryStore, Runner
    from workflows.store import DjangoStore

    workflow = WORKFLOWS[f"chain{CHAIN}"]
    hopping = async_to_sync(Runner(workflow, DjangoStore()).run)
    memory = Runner(workflow, InMemoryStore())

    def unsynchronised() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")
        try:
            system.chain(CHAIN)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET synchronous_commit")

    variants: list[tuple[str, Callable[[], Any]]] = [
        ("as shipped (services.start, eager)", lambda: system.chain(CHAIN)),
        ("Runner(workflow, DjangoStore()): a hop per call", lambda: hopping(0)),
        ("InMemoryStore (the engine alone)", lambda: system.loop.run_until_complete(memory.run(0))),
    ]
    if system.backend == "postgres":
        variants.insert(2, ("synchronous_commit=off (not durable)", unsynchronised))
    samples: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(ROUNDS):
        for name, variant in variants:
            begun = time.perf_counter()
            variant()
            samples[name].append((time.perf_counter() - begun) / CHAIN)
    lines = [f"experiments, {CHAIN}-node chain, median ms per node of {ROUNDS} rounds:"]
    lines += [f"  {name:52} {statistics.median(s) * 1e3:6.3f}" for name, s in samples.items()]
    return lines


def profile(system: Any) -> str:
    """The whole report for one system (run in its worker process)."""
    sections = [
        [f"cProfile of one {CHAIN}-node run as shipped:", cprofile(system)],
        chain_split(system),
        one_resume(system),
        experiments(system),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", nargs="*", help="row names to include (substring match)")
    args = parser.parse_args()
    from bench.common import machine
    from bench.compare.run import CONFIGS, RESULTS, Worker, ensure_databases

    candidates = [c for c in CONFIGS if c.system == "hitl" and c.backend != "memory"]
    if args.systems:
        wanted = [s.lower() for s in args.systems]
        configs = [c for c in candidates if any(s in c.name.lower() for s in wanted)]
    else:
        configs = [c for c in candidates if not c.options]
    ensure_databases([c.database for c in configs if c.database])
    log_dir = RESULTS / f"profile-{time.strftime('%Y%m%d-%H%M%S')}-logs"
    log_dir.mkdir(parents=True)
    print(machine())
    for config in configs:
        worker = Worker(config, log_dir)
        try:
            worker.call(op="warm_up", cycles=5)
            print(f"\n=== {config.name}\n")
            print(worker.call(op="profile"))
        finally:
            worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
