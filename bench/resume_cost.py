"""What a start and a resume cost, counted beside their times, for this project and
LangGraph on the same database (docs/performance.md, "What a start and a resume do"):
the comparison's 10-node workload (ten function nodes, a question; the answer and one
more node), through the public path (`services.start`, `services.submit_function_responses`
in-process; LangGraph's `invoke` and `Command(resume=...)`).

    .venv-bench/bin/python bench/resume_cost.py                  # both databases
    .venv-bench/bin/python bench/resume_cost.py --backends postgres --cycles 300

Per operation: statements, round trips (PostgreSQL: a statement outside a pipeline, a
pipeline, a COMMIT), transactions (as the database counts them), WAL flushes
(PostgreSQL's pg_stat_wal.wal_sync over the run, server-wide: run it on a quiet server),
and the median and p99 time. Beside them the floor measured in the same run on the same
connection kind: one round trip (`SELECT 1`) and one commit (`BEGIN; INSERT; COMMIT`).
Each system runs in a process of its own (the counters patch the driver). Client
instructions: `--one SYSTEM BACKEND DURABILITY --bare starts|cycles` under valgrind, with
two `--cycles` counts each; a start is the difference of the two `starts` runs over the
difference of their cycles, a resume that of the `cycles` runs less a start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PG = os.environ.get("HITL_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
SYSTEMS = {"hitl": "h_cost", "langgraph": "h_cost_lg"}  # scratch PostgreSQL databases


class Operations:
    """One system's start and resume of the 10-node workload, and the floor."""

    def __init__(self, system: str, backend: str, durability: str) -> None:
        from bench.compare.run import ensure_databases
        from bench.compare.systems import make
        from bench.compare.systems.counting import StatementCounts

        self.system_name, self.backend = system, backend
        options: dict[str, Any] = {}
        if backend == "postgres":
            ensure_databases([SYSTEMS[system]])
            options["url"] = f"{PG}/{SYSTEMS[system]}"
        if system == "hitl":
            options["hitl"] = {"DURABILITY": durability}
        else:
            options["durability"] = durability
        self.counts = StatementCounts()
        self.counts.active = False
        if backend == "postgres":
            self.counts.watch_psycopg()
        self.system = make(system, backend, options)
        if backend == "sqlite":
            connection = self._sqlite_connection()
            self.counts.watch_sqlite(connection, getattr(self.system_counter(), "trace", None))

    def system_counter(self) -> Any:
        return getattr(self.system, "counter", None) or getattr(self.system, "_commits", None)

    def _sqlite_connection(self) -> Any:
        if self.system_name == "hitl":
            from django.db import connection

            connection.ensure_connection()
            return connection.connection
        return self.system.saver.conn

    def start(self) -> Any:
        if self.system_name == "hitl":
            return self.system.start("chain_interrupt", 0)
        result = self.system._invoke("chain_interrupt", {"value": 0}, self.system.thread)
        assert len(result["__interrupt__"]) == 1
        return None

    def resume(self, started: Any) -> None:
        if self.system_name == "hitl":
            self.system.answer("chain_interrupt", f"{started}:ask", {"ok": True})
            return
        result = self.system._resume("chain_interrupt", {"ok": True}, self.system.thread)
        assert result["answer"] == {"ok": True}

    def transactions(self) -> int:
        return self.system.commits()

    def floor(self, count: int) -> dict[str, float]:
        """Median ms of one round trip and of one small committed write, on a connection
        of this system's kind."""
        if self.system_name == "hitl":
            commits = self.system.bare_commit(count)
            from django.db import connection

            with connection.cursor() as cursor:
                trips = []
                for _ in range(count):
                    begun = time.perf_counter()
                    cursor.execute("SELECT 1")
                    cursor.fetchall()
                    trips.append(time.perf_counter() - begun)
            return {"round_trip_ms": _ms(trips), "commit_ms": _ms(commits)}
        return {}


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _p99(samples: list[float]) -> float:
    return sorted(samples)[int(len(samples) * 0.99) - 1] * 1e3


def wal_syncs(backend: str) -> int | None:
    if backend != "postgres":
        return None
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as connection:
        (value,) = connection.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(value)


def measure(system: str, backend: str, durability: str, cycles: int, quiet: bool) -> dict:
    operations = Operations(system, backend, durability)
    for _ in range(20):  # warm up
        operations.resume(operations.start())
    if hasattr(operations.system, "verify"):
        operations.system.verify = False
    found: dict[str, Any] = {"system": system, "backend": backend, "durability": durability}
    for phase in ("start", "resume"):
        times, transactions, flushes, counted = [], 0, 0, operations.counts
        counted.reset()
        for _ in range(cycles):
            started = operations.start() if phase == "resume" else None
            before_tx, before_wal = operations.transactions(), wal_syncs(backend)
            counted.active = True
            begun = time.perf_counter()
            if phase == "start":
                started = operations.start()
            else:
                operations.resume(started)
            times.append(time.perf_counter() - begun)
            counted.active = False
            transactions += operations.transactions() - before_tx
            flushes += (wal_syncs(backend) or 0) - (before_wal or 0)
            if phase == "start":
                operations.resume(started)
        statements = counted.traced if backend == "sqlite" else counted.executed
        found[phase] = {
            "median_ms": _ms(times),
            "p99_ms": _p99(times),
            "statements": statements / cycles,
            "round_trips": None if backend == "sqlite" else counted.round_trips / cycles,
            "transactions": transactions / cycles,
            "wal_syncs": None if backend == "sqlite" else flushes / cycles,
        }
    found["floor"] = operations.floor(200)
    if not quiet:
        print(json.dumps(found), flush=True)
    return found


def bare(system: str, backend: str, durability: str, cycles: int, resumes: bool) -> None:
    """Warm up, then `cycles` starts (and their resumes): what valgrind counts."""
    operations = Operations(system, backend, durability)
    for _ in range(20):
        operations.resume(operations.start())
    if hasattr(operations.system, "verify"):
        operations.system.verify = False
    for _ in range(cycles):
        started = operations.start()
        if resumes:
            operations.resume(started)


def table(rows: list[dict]) -> str:
    lines = [
        "| backend | system | durability | operation | median ms | p99 ms | statements "
        "| round trips | transactions | WAL flushes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for phase in ("start", "resume"):
            p = row[phase]
            cells = [
                row["backend"],
                "this project" if row["system"] == "hitl" else "LangGraph",
                row["durability"],
                phase,
                f"{p['median_ms']:.2f}",
                f"{p['p99_ms']:.2f}",
                f"{p['statements']:.1f}",
                "-" if p["round_trips"] is None else f"{p['round_trips']:.1f}",
                f"{p['transactions']:.2f}",
                "-" if p["wal_syncs"] is None else f"{p['wal_syncs']:.2f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    floors = [
        f"{r['backend']}: one round trip {r['floor']['round_trip_ms']:.3f} ms, one commit "
        f"{r['floor']['commit_ms']:.3f} ms"
        for r in rows
        if r["floor"]
    ]
    return "\n".join(lines) + "\n\nFloor, same run: " + "; ".join(floors) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite"])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--one", nargs=3, metavar=("SYSTEM", "BACKEND", "DURABILITY"))
    parser.add_argument("--quiet", action="store_true", help="no output (under valgrind)")
    parser.add_argument(
        "--bare",
        choices=["starts", "cycles"],
        help="with --one: after the warm-up only --cycles starts, or starts and resumes, "
        "nothing counted (for valgrind: a resume's instructions are the difference)",
    )
    args = parser.parse_args()
    if args.one and args.bare:
        bare(*args.one, args.cycles, resumes=args.bare == "cycles")
        return
    if args.one:
        measure(*args.one, args.cycles, args.quiet)
        return
    from bench.common import machine

    rows = []
    for backend in args.backends:
        durabilities = ["sync", "async"] if backend == "postgres" else ["sync"]
        for durability in durabilities:
            for system in SYSTEMS:
                command = [sys.executable, __file__, "--one", system, backend, durability]
                output = subprocess.run(
                    [*command, "--cycles", str(args.cycles)],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                ).stdout
                rows.append(json.loads(output.strip().splitlines()[-1]))
    print(machine())
    print(table(rows))


if __name__ == "__main__":
    main()
