"""Engine overhead on InMemoryStore: per-node cost and resume latency (no Django).

Run from the repository root:

    python bench/engine_overhead.py            # full run (well under a minute)
    python bench/engine_overhead.py --quick    # fewer repetitions, a few seconds

Targets: at most 0.1 ms per node; resume under 1 ms; the 1,000th resume on
the same store within 20% of the first.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine, percentile  # noqa: E402
from workflows.engine import (  # noqa: E402
    START,
    FunctionResponse,
    InMemoryStore,
    JoinNode,
    NodeStatus,
    RequestInput,
    Runner,
    Workflow,
    node,
)

NODE_TARGET_MS = 0.1
RESUME_TARGET_MS = 1.0
GROWTH_TARGET = 1.20
SESSION = "bench-session"


# --- helpers -------------------------------------------------------------------------


def ms(ns: float) -> float:
    return ns / 1e6


def growth_rows(
    first_label: str, last_label: str, first: list[float], last: list[float]
) -> list[tuple[str, ...]]:
    """Two table rows: the early resumes against the target, the late ones against it and
    against the early ones (the growth ratio)."""
    first_med, last_med = statistics.median(first), statistics.median(last)
    ratio = last_med / first_med
    return [
        (
            first_label,
            ms(first_med),
            ms(percentile(first, 99)),
            "",
            "",
            f"< {RESUME_TARGET_MS} ms",
            verdict(ms(first_med) < RESUME_TARGET_MS),
        ),
        (
            last_label,
            ms(last_med),
            ms(percentile(last, 99)),
            f"{ms(first_med):.4f}",
            f"{ratio:.2f}",
            f"< {RESUME_TARGET_MS} ms, ratio <= {GROWTH_TARGET:.2f}",
            verdict(ms(last_med) < RESUME_TARGET_MS and ratio <= GROWTH_TARGET),
        ),
    ]


def plain_functions(count: int) -> list[Callable[[int], int]]:
    """`count` distinct trivial functions (what the nodes wrap)."""

    def make() -> Callable[[int], int]:
        def f(node_input: int) -> int:
            return node_input + 1

        return f

    return [make() for _ in range(count)]


def bare_calls_ns(functions: list[Callable[[int], int]], repeats: int) -> list[float]:
    """Baseline: call the plain functions directly in a loop; ns per call, per repeat."""
    samples = []
    for _ in range(repeats):
        value = 0
        start = time.perf_counter_ns()
        for f in functions:
            value = f(value)
        samples.append((time.perf_counter_ns() - start) / len(functions))
    return samples


# --- workflows -----------------------------------------------------------------------


def chain_workflow(functions: list[Callable[[int], int]]) -> Workflow:
    nodes = [node(name=f"n{i}")(f) for i, f in enumerate(functions, 1)]
    return Workflow(name="chain", edges=[(START, *nodes)])


def fanout_workflow(functions: list[Callable[[int], int]]) -> Workflow:
    join = JoinNode("join")
    nodes = [node(name=f"w{i}")(f) for i, f in enumerate(functions, 1)]
    return Workflow(name="fanout", edges=[(START, n, join) for n in nodes])


def resume_workflow(chain_length: int = 10) -> Workflow:
    @node(name="ask")
    def ask(node_input: int) -> RequestInput:
        return RequestInput(message="approve?", payload={"value": node_input})

    @node(name="after")
    def after(node_input: Any) -> Any:
        return node_input

    nodes = [node(name=f"c{i}")(f) for i, f in enumerate(plain_functions(chain_length), 1)]
    return Workflow(name="resume", edges=[(START, *nodes, ask, after)])


# --- measurements --------------------------------------------------------------------


async def per_node_ns(workflow: Workflow, size: int, repeats: int, expect: Any) -> list[float]:
    """Total wall time of `runner.run` divided by the node count, one sample per run."""
    store = InMemoryStore()
    runner = Runner(workflow, store)
    await runner.run(0)  # warm-up, not measured
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        result = await runner.run(0)
        samples.append((time.perf_counter_ns() - start) / size)
        assert result.status == NodeStatus.COMPLETED, result.error
        assert result.output == expect, result.output
    return samples


async def resume_latencies(count: int, interleaved: bool) -> list[float]:
    """Start `count` invocations on one store and resume each; ns per resume, in order.

    interleaved=False: start all, then resume all (the store is full for every resume).
    interleaved=True: start and resume one after the other (the store grows as we go).
    """
    workflow = resume_workflow()
    runner = Runner(workflow, InMemoryStore())

    async def start() -> str:
        result = await runner.run(0, session_id=SESSION)
        assert result.status == NodeStatus.WAITING, result.status
        (interrupt_id,) = result.interrupts
        return interrupt_id

    async def resume(interrupt_id: str) -> float:
        response = [FunctionResponse(interrupt_id, "ask", {"ok": True})]
        begin = time.perf_counter_ns()
        result = await runner.resume(response)
        elapsed = time.perf_counter_ns() - begin
        assert result.status == NodeStatus.COMPLETED, result.status
        assert result.output == {"ok": True}, result.output
        return elapsed

    if interleaved:
        return [await resume(await start()) for _ in range(count)]
    ids = [await start() for _ in range(count)]
    return [await resume(i) for i in ids]


async def paired_resume_latencies(history: int, pairs: int) -> tuple[list[float], list[float]]:
    """The 1st resume on a new store and the (history+1)th on a grown store, alternately.

    Each pair is measured back to back (in alternating order), so a stretch of machine
    noise hits both sides alike; the first/last windows above are minutes... seconds apart.
    """
    workflow = resume_workflow()

    async def start(runner: Runner) -> str:
        result = await runner.run(0, session_id=SESSION)
        (interrupt_id,) = result.interrupts
        return interrupt_id

    async def resume(runner: Runner, interrupt_id: str) -> float:
        response = [FunctionResponse(interrupt_id, "ask", {"ok": True})]
        begin = time.perf_counter_ns()
        result = await runner.resume(response)
        elapsed = time.perf_counter_ns() - begin
        assert result.status == NodeStatus.COMPLETED, result.status
        return elapsed

    grown = Runner(workflow, InMemoryStore())
    for _ in range(history):
        await resume(grown, await start(grown))
    young_samples, grown_samples = [], []
    for index in range(pairs):
        young = Runner(workflow, InMemoryStore())
        young_id, grown_id = await start(young), await start(grown)
        if index % 2:
            grown_samples.append(await resume(grown, grown_id))
            young_samples.append(await resume(young, young_id))
        else:
            young_samples.append(await resume(young, young_id))
            grown_samples.append(await resume(grown, grown_id))
    return young_samples, grown_samples


async def warm_up_resume() -> None:
    """Exercise the resume path on a throwaway store so the first samples are not cold."""
    await resume_latencies(50, interleaved=True)


class GcCounter:
    """Counts cyclic-GC collections per generation while active."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.counts[info["generation"]] += 1

    def __enter__(self) -> GcCounter:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


# --- report --------------------------------------------------------------------------

Row = tuple[str, float, float, str, str, str, str]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_table(rows: list[Row]) -> None:
    header = ("measurement", "median ms", "p99 ms", "baseline ms", "ratio", "target", "result")
    table = [header] + [
        (name, f"{med:.4f}", f"{p99:.4f}", base, ratio, target, result)
        for name, med, p99, base, ratio, target, result in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for index, row in enumerate(table):
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))


async def main(quick: bool) -> None:
    repeats = 5 if quick else 20
    resumes = 200 if quick else 1000
    window = 20 if quick else 50
    rounds = 1 if quick else 3
    pairs = 50 if quick else 200
    began = time.perf_counter()
    print(machine())
    print(
        f"InMemoryStore, {repeats} runs per per-node figure (after 1 warm-up run), "
        f"{resumes} resumes per resume series x {rounds} rounds; time.perf_counter_ns; "
        "cyclic GC left on"
    )
    print()
    rows: list[Row] = []

    # 1. 1,000-node chain.
    gc.collect()
    functions = plain_functions(1000)
    base = bare_calls_ns(functions, repeats)
    chain = await per_node_ns(chain_workflow(functions), 1000, repeats, expect=1000)
    base_med, chain_med = statistics.median(base), statistics.median(chain)
    rows.append(
        (
            "chain of 1,000: per node",
            ms(chain_med),
            ms(percentile(chain, 99)),
            f"{ms(base_med):.6f}",
            f"{chain_med / base_med:,.0f}x",
            f"<= {NODE_TARGET_MS} ms",
            verdict(ms(chain_med) <= NODE_TARGET_MS),
        )
    )

    # 2. 200-wide fan-out into a JoinNode.
    gc.collect()
    functions = plain_functions(200)
    base = bare_calls_ns(functions, repeats)
    expect = {f"w{i}": 1 for i in range(1, 201)}
    fanout = await per_node_ns(fanout_workflow(functions), 200, repeats, expect=expect)
    base_med, fanout_med = statistics.median(base), statistics.median(fanout)
    rows.append(
        (
            "fan-out of 200 + join: per node",
            ms(fanout_med),
            ms(percentile(fanout, 99)),
            f"{ms(base_med):.6f}",
            f"{fanout_med / base_med:,.0f}x",
            f"<= {NODE_TARGET_MS} ms",
            verdict(ms(fanout_med) <= NODE_TARGET_MS),
        )
    )

    # 3. Resume latency: 10 nodes, an interrupt, 1 node; first vs last on one store.
    # Each series runs `rounds` times on a fresh store; the first and the last `window`
    # samples of every round are pooled, so one noisy stretch cannot decide a verdict.
    gc.collect()
    await warm_up_resume()
    raw: dict[str, list[list[float]]] = {}
    collections: dict[str, list[int]] = {}
    for label, interleaved in (("start all, resume all", False), ("start+resume each", True)):
        raw[label] = []
        with GcCounter() as counter:
            for _ in range(rounds):
                gc.collect()
                raw[label].append(await resume_latencies(resumes, interleaved))
        collections[label] = counter.counts
        first = [x for series in raw[label] for x in series[:window]]
        last = [x for series in raw[label] for x in series[-window:]]
        rows += growth_rows(
            f"resume, {label}: first {window}", f"resume, {label}: last {window}", first, last
        )

    # 4. The same growth question, paired: 1st resume on a new store vs the 1,000th+ on a
    # store that already ran `resumes - 1` invocations, measured alternately.
    gc.collect()
    young, grown = await paired_resume_latencies(resumes - 1, pairs)
    rows += growth_rows(
        f"resume, paired: 1st on new store (x{pairs})",
        f"resume, paired: {resumes:,}th+ on grown store",
        young,
        grown,
    )

    print_table(rows)
    print()
    print(
        "per node = run time / node count (includes the run's checkpoint writes and loading "
        "the result); baseline = the same plain functions called directly in a loop."
    )
    print(
        f"resume = `await runner.resume([FunctionResponse(id, 'ask', {{'ok': True}})])` until "
        f"it returns COMPLETED; baseline of a 'last {window}' row = median of its 'first "
        f"{window}' row; ratio = last/first. Paired rows: each 1st resume on a new store is "
        f"timed back to back with a resume on a store that already holds {resumes - 1:,} "
        "completed invocations (so both see the same machine noise)."
    )
    for label, rounds_samples in raw.items():
        samples = [x for series in rounds_samples for x in series]
        firsts = ", ".join(f"{ms(series[0]):.4f}" for series in rounds_samples)
        lasts = ", ".join(f"{ms(series[-1]):.4f}" for series in rounds_samples)
        gen0, gen1, gen2 = collections[label]
        print(
            f"  {label}: 1st sample per round {firsts} ms; {resumes:,}th {lasts} ms; "
            f"all {len(samples):,}: median {ms(statistics.median(samples)):.4f}, "
            f"p99 {ms(percentile(samples, 99)):.4f}, max {ms(max(samples)):.4f} ms; "
            f"cyclic GC runs during the series (gen0/1/2): {gen0}/{gen1}/{gen2}"
        )
    print(f"total bench time {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    asyncio.run(main(args.quick))
