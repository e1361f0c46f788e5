"""Side-by-side comparison: this project, LangGraph and Google ADK on the same workloads,
each system in its own long-lived process, cycles interleaved in rotating blocks.

    make bench-compare                       # everything (installs .venv-bench first)
    .venv-bench/bin/python -m bench.compare.run --quick
    .venv-bench/bin/python -m bench.compare.run --only chain_interrupt --rounds 4

Results go to bench/results/compare-<time>.json; `--write-docs` also rewrites the tables
in docs/performance.md and the plots under docs/img/ (see bench/compare/report.py).
PostgreSQL: $HITL_BENCH_PG (default postgres://postgres@127.0.0.1:5432), one scratch
database per system (created when missing; emptied at every start).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_facts

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PG = os.environ.get("HITL_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
# Appended to the scratch databases' names: two runs on one server keep apart.
SUFFIX = os.environ.get("HITL_BENCH_DATABASE_SUFFIX", "")


def scratch(name: str) -> str:
    """The name of the scratch database `name` of this run."""
    return name + SUFFIX


@dataclass
class Config:
    name: str  # row label
    system: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    baseline: str | None = None  # the row of this project it is compared with
    database: str | None = None  # PostgreSQL scratch database

    def spec(self) -> dict[str, Any]:
        options = dict(self.options)
        if self.database:
            options["url"] = f"{PG}/{self.database}"
        return {"system": self.system, "backend": self.backend, "options": options}


WORKLOADS = ["chain_interrupt", "chain", "fanout", "history", "commit"]
PREPARED = {"hitl": {"POSTGRES_PREPARED_STATEMENTS": True}}
CONFIGS = [
    Config("hitl memory", "hitl", "memory"),
    Config("hitl SQLite", "hitl", "sqlite"),
    Config("hitl PostgreSQL", "hitl", "postgres", database=scratch("h_perf")),
    Config(
        "hitl PostgreSQL prepared", "hitl", "postgres", PREPARED, database=scratch("h_perf_prep")
    ),
    # HITL["DURABILITY"] "async": mid-pass transitions commit without waiting for the disk.
    Config(
        "hitl PostgreSQL async",
        "hitl",
        "postgres",
        {"hitl": {"DURABILITY": "async"}},
        database=scratch("h_perf_async"),
    ),
    # The node transition as the one-statement CTE instead of the store's function.
    Config(
        "hitl PostgreSQL CTE",
        "hitl",
        "postgres",
        {"store_function": False},
        database=scratch("h_perf_cte"),
    ),
    Config("LangGraph InMemorySaver", "langgraph", "memory", baseline="hitl memory"),
    Config("LangGraph SqliteSaver sync", "langgraph", "sqlite", baseline="hitl SQLite"),
    Config(
        "LangGraph PostgresSaver sync",
        "langgraph",
        "postgres",
        {"durability": "sync"},
        baseline="hitl PostgreSQL",
        database=scratch("h_perf_lg"),
    ),
    Config(
        "LangGraph PostgresSaver async",
        "langgraph",
        "postgres",
        {"durability": "async"},
        baseline="hitl PostgreSQL async",
        database=scratch("h_perf_lga"),
    ),
    Config("ADK InMemorySessionService", "adk", "memory", baseline="hitl memory"),
    Config("ADK DatabaseSessionService SQLite", "adk", "sqlite", baseline="hitl SQLite"),
]


@dataclass(frozen=True)
class Plan:
    chain_rounds: int = 10  # x chain_block cycles of the 10-node chain + interrupt
    chain_block: int = 20
    long_rounds: dict[int, int] = field(default_factory=lambda: {100: 6, 1000: 3})
    fanout_rounds: int = 2
    history_size: int = 1000
    history_rounds: int = 2
    adk_history_size: int = 100  # ADK's resume grows with the session: 1,000 takes too long
    adk_long_rounds: int = 1  # ADK's 1,000-node chain and fan-out: one round
    commit_rounds: int = 3  # x commit_block bare commits on each of this project's databases
    commit_block: int = 200

    @classmethod
    def quick(cls) -> Plan:
        return cls(3, 10, {100: 2, 1000: 1}, 1, 100, 1, 50, 1, 1, 100)


class Worker:
    """A system's process; `call` sends one command and waits for its answer."""

    def __init__(self, config: Config, log_dir: Path) -> None:
        self.config = config
        self.log = open(log_dir / f"{config.name.replace(' ', '_')}.log", "w")  # noqa: SIM115
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.compare.worker", json.dumps(config.spec())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=ROOT,
            env=env,
        )

    def call(self, **command: Any) -> Any:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.config.name} died; see {self.log.name}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.config.name}: {answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()


def ensure_databases(names: list[str]) -> None:
    """Create the scratch databases that do not exist yet."""
    if not names:
        return
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as connection:
        existing = {r[0] for r in connection.execute("SELECT datname FROM pg_database")}
        for name in names:
            if name not in existing:
                connection.execute(f'CREATE DATABASE "{name}"')


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {**machine_facts(), "load_average_start": os.getloadavg()}
    try:
        import psycopg

        with psycopg.connect(f"{PG}/postgres") as connection:
            facts["postgresql"] = connection.execute("SHOW server_version").fetchone()[0]
            facts["synchronous_commit"] = connection.execute("SHOW synchronous_commit").fetchone()[
                0
            ]
    except Exception as exc:  # reported, not fatal: the PostgreSQL rows then fail
        facts["postgresql"] = f"unreachable: {exc}"
    import sqlite3
    from importlib.metadata import version

    facts["sqlite"] = sqlite3.sqlite_version
    for package in ("django", "psycopg", "langgraph", "langgraph-checkpoint-postgres"):
        facts[package] = version(package)
    facts["langgraph-checkpoint-sqlite"] = version("langgraph-checkpoint-sqlite")
    facts["google-adk"] = version("google-adk")
    return facts


def rotated(items: list[Any], shift: int) -> list[Any]:
    if not items:  # a workload none of the chosen systems runs (--systems)
        return items
    shift %= len(items)
    return items[shift:] + items[:shift]


def collect(args: argparse.Namespace, plan: Plan, configs: list[Config]) -> dict[str, Any]:
    from tqdm import tqdm

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = RESULTS / f"compare-{stamp}-logs"
    log_dir.mkdir()
    ensure_databases([c.database for c in configs if c.database])
    data: dict[str, Any] = {"machine": machine(), "plan": plan.__dict__, "runs": {}}
    workers = {}
    for config in tqdm(configs, desc="starting systems", unit="system"):
        workers[config.name] = Worker(config, log_dir)
        workers[config.name].call(op="warm_up", cycles=5)
    names = [c.name for c in configs]
    runs: dict[str, dict[str, list[Any]]] = {n: {} for n in names}
    data["runs"] = runs

    def blocks(workload: str, rounds: int, command: dict[str, Any], who: list[str]) -> None:
        for index in tqdm(range(rounds), desc=workload, unit="round", leave=True):
            for name in rotated(who, index):
                answer = workers[name].call(**command)
                runs[name].setdefault(workload, []).append(answer)

    only = set(args.only or WORKLOADS)
    adk = [n for n in names if n.startswith("ADK")]
    rest = [n for n in names if n not in adk]
    if "chain_interrupt" in only:
        command = {"op": "chain_interrupt", "cycles": plan.chain_block}
        blocks("chain_interrupt", plan.chain_rounds, command, names)
    if "chain" in only:
        for size, rounds in plan.long_rounds.items():
            command = {"op": "chain", "size": size, "cycles": 1}
            blocks(f"chain{size}", rounds, command, rest)
            blocks(f"chain{size}", min(rounds, plan.adk_long_rounds), command, adk)
    if "fanout" in only:
        command = {"op": "fanout", "width": 100}
        blocks("fanout100", plan.fanout_rounds, command, rest)
        blocks("fanout100", plan.adk_long_rounds, command, adk)
    if "history" in only:
        for size, who in ((plan.history_size, rest), (plan.adk_history_size, adk)):
            points = history_points(size)
            command = {"op": "history", "size": size, "points": points}
            blocks(f"history{size}", plan.history_rounds, command, who)
    if "commit" in only:
        # The floor under a node transition, on the databases this project runs on.
        floors = [c.name for c in configs if c.system == "hitl" and c.backend != "memory"]
        command = {"op": "bare_commit", "count": plan.commit_block}
        blocks("commit", plan.commit_rounds, command, floors)
    for worker in workers.values():
        worker.close()
    data["machine"]["load_average_end"] = os.getloadavg()
    out = RESULTS / f"compare-{stamp}.json"
    out.write_text(json.dumps(data, indent=1))
    print(f"results: {out}")
    return data


def history_points(size: int) -> list[int]:
    """Windows of 10 invocations: the first, around the 100th, and the last ones."""
    windows = [range(1, 11), range(96, 106), range(size - 9, size + 1)]
    return sorted({i for w in windows for i in w if 1 <= i <= size})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, help="workloads to run")
    parser.add_argument("--systems", nargs="*", help="row names to include (substring match)")
    parser.add_argument("--rounds", type=int, help="rounds of the 10-node chain workload")
    parser.add_argument("--write-docs", action="store_true", help="tables and plots into docs/")
    parser.add_argument("--from-json", help="report an earlier results file instead of running")
    args = parser.parse_args()
    plan = Plan.quick() if args.quick else Plan()
    if args.rounds:
        plan = Plan(**{**plan.__dict__, "chain_rounds": args.rounds})
    configs = CONFIGS
    if args.systems:
        configs = [c for c in CONFIGS if any(s.lower() in c.name.lower() for s in args.systems)]
    from bench.compare import report

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        data = collect(args, plan, configs)
    tables = report.tables(data, CONFIGS)
    print(tables)
    if args.write_docs:
        report.write_docs(data, CONFIGS, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
