"""What a rewind costs against the size of its invocation (DESIGN 3.8).

Run from the repository root:

    python bench/rewind.py                # in memory and on PostgreSQL
    python bench/rewind.py --quick        # fewer repetitions
    python bench/rewind.py --memory-only  # no database

One workflow: START -> ask -> after, and beside it START -> a chain of WIDE nodes that does
not depend on the answer. A rewind of `ask` re-runs `after` only, whatever WIDE is: it
should cost what its slice (two node runs) costs, not what the invocation holds. Each
invocation is run, answered, then rewound; the table gives the median and p99 of the
rewind (storing it and driving the slice), of `plan_rewind`, and, for scale, of the
invocation's first run and answer (what re-running everything after the answer, as a
checkpoint fork would, starts from). On InMemoryStore and on the database store
(`DjangoStore(inline=True)`, as a worker runs it) on PostgreSQL at
$HITL_BENCH_REWIND_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/hitl_bench_rewind,
a scratch database made from the models, dropped and created anew). Nothing is asserted.
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

from bench.common import machine, percentile  # noqa: E402

DATABASE_URL = os.environ.get(
    "HITL_BENCH_REWIND_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hitl_bench_rewind"
)
WIDTHS = (10, 100, 1000)


def workflow(wide: int) -> Any:
    from workflows.engine import RequestInput, Workflow, node

    @node(name="ask")
    def ask(node_input: Any) -> Any:
        return RequestInput(interrupt_id=f"q-{wide}-{node_input}", message="how many?")

    @node(name="after")
    def after(node_input: Any) -> Any:
        return {"after": node_input}

    def step(index: int) -> Any:
        if index == wide - 1:  # one terminal output per workflow run: `after`'s
            return node(name=f"s{index}")(lambda node_input: None)
        return node(name=f"s{index}")(lambda node_input: node_input)

    chain = [step(i) for i in range(wide)]
    return Workflow(name=f"rewind_{wide}", edges=[("START", ask, after), ("START", *chain)])


async def measure(new_store: Any, wide: int, repeat: int) -> dict[str, list[float]]:
    """Milliseconds per phase, one sample per invocation (the first warms up)."""
    from workflows.engine import FunctionResponse, NodeStatus, Runner

    store = new_store()
    runner = Runner(workflow(wide), store=store)
    samples: dict[str, list[float]] = {"run + answer": [], "plan_rewind": [], "rewind": []}
    for index in range(repeat + 1):
        interrupt_id = f"q-{wide}-{index}"
        started = time.perf_counter()
        await runner.run(index)
        await runner.resume([FunctionResponse(interrupt_id, "q", 1)])
        ran = time.perf_counter()
        plan = await runner.plan_rewind(interrupt_id)
        planned = time.perf_counter()
        result = await runner.rewind(interrupt_id, 2)
        rewound = time.perf_counter()
        assert result.status == NodeStatus.COMPLETED, result.error
        assert len(plan.superseded) == 1, plan
        if index:
            samples["run + answer"].append((ran - started) * 1000)
            samples["plan_rewind"].append((planned - ran) * 1000)
            samples["rewind"].append((rewound - planned) * 1000)
    return samples


def table(title: str, results: dict[int, dict[str, list[float]]]) -> str:
    lines = [
        title,
        "| node runs | kept | re-run | run + answer median | plan_rewind median / p99 | "
        "rewind median / p99 | rewind / (run + answer) |",
        "|---|---|---|---|---|---|---|",
    ]
    for wide, phases in results.items():
        full = statistics.median(phases["run + answer"])
        plan, rewind = phases["plan_rewind"], phases["rewind"]
        lines.append(
            f"| {wide + 3} | {wide + 2} | 1 | {full:.2f} ms | "
            f"{statistics.median(plan):.2f} / {percentile(plan, 99):.2f} ms | "
            f"{statistics.median(rewind):.2f} / {percentile(rewind, 99):.2f} ms | "
            f"{statistics.median(rewind) / full:.3f} |"
        )
    return "\n".join(lines)


def setup_postgres() -> None:
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")
    import django

    django.setup()
    from bench.common import build_database

    build_database()


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
    print(f"{repeat} invocations per size after one warm-up\n")
    memory = {w: asyncio.run(measure(InMemoryStore, w, repeat)) for w in WIDTHS}
    print(table("InMemoryStore", memory))
    if not args.memory_only:
        from django.db import connection

        from workflows.store import DjangoStore

        def database_store() -> DjangoStore:
            return DjangoStore(inline=True)

        database = {w: asyncio.run(measure(database_store, w, repeat)) for w in WIDTHS}
        print()
        print(table("PostgreSQL (DjangoStore)", database))
        connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
