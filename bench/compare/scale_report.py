"""Tables and the throughput plot of the scale runs (bench/compare/scale.py)."""

from __future__ import annotations

from typing import Any

from bench.compare.plots import line_plot
from bench.compare.report import markdown

WORKER_SPANS = [
    ("accepted_to_completed", "answer accepted (the call returned) -> row shows COMPLETED"),
    ("by_row_clocks", "the same, by the rows' clocks (finished_at - resolved_at)"),
    ("submit", "the submit_function_responses call"),
    ("answer_to_completed", "answer given -> COMPLETED (the call and the worker)"),
    ("in_process", "the same answer in-process (eager), for comparison"),
    ("to_waiting", "start -> WAITING, through the worker"),
]
WORKER_TARGETS = (50.0, 250.0)  # ms: accepted -> COMPLETED, p50 and p99


def worker_lines(worker: dict[str, Any]) -> list[str]:
    rows = [
        [label, f"{worker[key]['median_ms']:.2f}", f"{worker[key]['p99_ms']:.2f}"]
        for key, label in WORKER_SPANS
    ]
    accepted = worker["accepted_to_completed"]
    p50, p99 = WORKER_TARGETS
    verdicts = [
        f"p50 under {p50:g} ms: {'met' if accepted['median_ms'] < p50 else 'missed'}",
        f"p99 under {p99:g} ms: {'met' if accepted['p99_ms'] < p99 else 'missed'}",
    ]
    return [
        "### End to end through a worker (PostgreSQL + Redis)",
        "",
        f"`expense_approval` asking its manager, {accepted['n']} invocations one at a time, "
        "one `celery worker -P solo` keeping its database connection (the default); the bench "
        "process polls the invocation's row every millisecond.",
        "",
        markdown(["span", "median ms", "p99 ms"], rows),
        "",
        f"Targets for the worker's part: {'; '.join(verdicts)}.",
        "",
    ]


def scale_tables(results: dict[str, Any]) -> str:
    latency, throughput = results.get("latency", {}), results.get("throughput", {})
    lines = []
    if latency:
        empty, seeded = latency["resume_empty"], latency["resume_seeded"]
        lines += [
            f"### Resume with {latency['waiting']:,} invocations waiting (PostgreSQL)",
            "",
            markdown(
                ["database", "resume median ms", "p99 ms", "resumes"],
                [
                    [
                        "empty",
                        f"{empty['median_ms']:.2f}",
                        f"{empty['p99_ms']:.2f}",
                        str(empty["n"]),
                    ],
                    [
                        f"{latency['waiting']:,} waiting",
                        f"{seeded['median_ms']:.2f}",
                        f"{seeded['p99_ms']:.2f}",
                        str(seeded["n"]),
                    ],
                ],
            ),
            "",
            f"Ratio (waiting / empty, median): {seeded['median_ms'] / empty['median_ms']:.2f}. "
            f"Seeding took {latency['seed_seconds']:.0f} s.",
            "",
            "### Bytes stored per waiting `expense_approval` invocation",
            "",
            f"Tables and indexes grew by {latency['bytes_per_waiting']:,.0f} bytes per waiting "
            "invocation (1,000 of them, PostgreSQL). Its rows' own sizes: "
            + ", ".join(f"{k} {v:,} B" for k, v in latency["row_bytes"].items())
            + ".",
            "",
        ]
    per_task = results.get("throughput_per_task", {})
    if throughput:
        rows = []
        for workers, r in sorted(throughput.items(), key=lambda kv: int(kv[0])):
            other = per_task.get(workers)
            rows.append(
                [
                    str(workers),
                    str(r["invocations"]),
                    f"{r['per_second']:.1f}",
                    f"{other['per_second']:.1f}" if other else "-",
                ]
            )
        lines += [
            "### Throughput: completed invocations per second (PostgreSQL + Redis)",
            "",
            "The auto-approved path of `expense_approval` (4 function nodes), invocations created "
            "first, then one `run_invocation` message each published at once; from the first "
            "publish until every row is COMPLETED.",
            "",
            markdown(
                [
                    "worker processes",
                    "invocations",
                    "completed / s (connections kept: the default)",
                    "completed / s (new connection per task: WORKER_CONN_MAX_AGE=0)",
                ],
                rows,
            ),
            "",
        ]
    if results.get("worker"):
        lines += worker_lines(results["worker"])
    load = results.get("load_average_start"), results.get("load_average_end")
    lines.append(f"Load average at start {load[0]}, at end {load[1]}.")
    return "\n".join(lines)


def plot_throughput(results: dict[str, Any]) -> None:
    """docs/img/perf-throughput.png: completed invocations per second per worker count."""
    rates = {
        label: {int(w): r["per_second"] for w, r in results.get(key, {}).items()}
        for key, label in (
            ("throughput", "connections kept (the default)"),
            ("throughput_per_task", "a new connection per task (WORKER_CONN_MAX_AGE=0)"),
        )
    }
    line_plot(
        rates,
        "perf-throughput.png",
        title="Throughput on PostgreSQL + Redis",
        xlabel="celery worker processes",
        ylabel="completed invocations / s",
        log=False,
        size=(6, 4),
    )
