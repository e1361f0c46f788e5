"""What an approval gate that passes on a grant, and an effect, cost per node.

Run from the repository root:

    python bench/gates.py                # in memory and on PostgreSQL
    python bench/gates.py --quick        # fewer repetitions
    python bench/gates.py --memory-only  # no database

Three chains of NODES nodes each, run by the engine's Runner: plain nodes; the same nodes
each behind an approval gate that a live `always` grant covers (so none asks); the plain
nodes each performing one `ctx.effect`. On InMemoryStore and on the database store
(`DjangoStore(inline=True)`, as a worker runs it) on PostgreSQL at
$HITL_BENCH_GATES_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/hitl_bench_gates,
a scratch database made from the models, dropped and created anew each run). The store is
wrapped to count its reads (`load_*`, `find_*`) and its commits (each one transaction).
The table shows, per node, the median time over the repetitions and the reads and commits
beyond the plain chain's. Targets: a gate passing on a grant costs at most one extra read
(and no commit); an effect two extra commits (its start, and its finish before
`ctx.effect` returns). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import CountingStore, machine  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_GATES_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench_gates"
)
NODES = 50


def chains() -> dict[str, Any]:
    from workflows.engine import Workflow, approval_gate, node

    def plain(index: int) -> Any:
        def body(node_input: int) -> int:
            return node_input + 1

        return node(name=f"n{index}")(body)

    def effectful(index: int) -> Any:
        async def body(node_input: int, ctx: Any) -> int:
            return int(await ctx.effect("write", add_one, node_input))

        return node(name=f"n{index}")(body)

    def gated(index: int) -> Any:
        return approval_gate(message="Go?", remember=("always",))(plain(index))

    return {
        kind: Workflow(name=f"bench_{kind}", edges=[("START", *(make(i) for i in range(NODES)))])
        for kind, make in (("plain", plain), ("gated", gated), ("effect", effectful))
    }


def add_one(value: int) -> int:
    return value + 1


async def grant_all(store: Any, workflow: Any) -> None:
    from workflows.engine import GrantRecord

    for name in workflow.nodes:
        await store.record_grant(
            GrantRecord(
                id=f"g-{workflow.name}-{name}",
                workflow_name=workflow.name,
                node_name=name,
                scope="always",
            )
        )


async def measure(new_store: Any, repeat: int) -> dict[str, tuple[float, float, float]]:
    """{chain: (median ms per node, reads per node, commits per node)}."""
    from workflows.engine import NodeStatus, Runner

    results = {}
    for kind, workflow in chains().items():
        store = new_store()
        if kind == "gated":
            await grant_all(store, workflow)
        samples, reads, commits = [], 0.0, 0.0
        for round_number in range(repeat + 1):
            counting = CountingStore(store)
            runner = Runner(workflow, store=counting)
            started = time.perf_counter()
            result = await runner.run(0)
            elapsed = time.perf_counter() - started
            assert result.status == NodeStatus.COMPLETED, result.error
            if round_number:  # the first round warms up
                samples.append(elapsed * 1000 / NODES)
            # The run's own reads and commits (result() reads the checkpoint and events).
            reads, commits = (counting.reads - 2) / NODES, counting.commits / NODES
        results[kind] = (statistics.median(samples), reads, commits)
    return results


def table(title: str, results: dict[str, tuple[float, float, float]]) -> str:
    plain_ms, plain_reads, plain_commits = results["plain"]
    lines = [
        f"{title}",
        "| chain (per node)            |  median ms | extra ms | reads | extra | commits | extra |",
        "|-----------------------------|------------|----------|-------|-------|---------|-------|",
    ]
    labels = {
        "plain": "plain node",
        "gated": "gated, passing on a grant",
        "effect": "one ctx.effect",
    }
    for kind, (ms, reads, commits) in results.items():
        lines.append(
            f"| {labels[kind]:<27} | {ms:>10.4f} | {ms - plain_ms:>8.4f} | {reads:>5.2f} | "
            f"{reads - plain_reads:>5.2f} | {commits:>7.2f} | {commits - plain_commits:>5.2f} |"
        )
    return "\n".join(lines)


def setup_postgres() -> str:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django

    django.setup()
    from django.db import connection

    name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"].update(NAME=name, MIGRATE=False)
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--memory-only", action="store_true", help="no database")
    args = parser.parse_args()
    repeat = 5 if args.quick else 30

    from workflows.engine import InMemoryStore

    facts = []
    if not args.memory_only:
        setup_postgres()
        from bench.common import postgres_version

        facts.append(postgres_version())
    print(machine(*facts))
    print(f"chains of {NODES} nodes, {repeat} runs each after one warm-up\n")
    print(table("InMemoryStore", asyncio.run(measure(InMemoryStore, repeat))))
    if not args.memory_only:
        from workflows.store import DjangoStore

        def database_store() -> DjangoStore:
            return DjangoStore(inline=True)

        print()
        print(table("PostgreSQL (DjangoStore)", asyncio.run(measure(database_store, repeat))))
        from django.db import connection

        connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
