"""The capacity model of docs/scaling.md, from what bench/capacity.py measured: its tables,
what a deployment needs at a given rate, and the plot of the model's line against the
measured throughput (docs/img/capacity.svg, SVG written by hand: no plotting library)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"
RATES = (100, 1_000, 10_000)  # completed invocations per second the plan is given for

COST_ROWS = [
    ("write_transactions", "write transactions committed", "{:.1f}"),
    ("transactions", "transactions committed (reads included)", "{:.1f}"),
    ("wal_bytes_lsn", "WAL bytes", "{:,.0f}"),
    ("wal_records", "WAL records", "{:.0f}"),
    ("wal_fpi", "WAL full-page images (after a checkpoint)", "{:.2f}"),
    ("wal_flushes", "WAL flushes (fsync)", "{:.1f}"),
    ("rows", "rows stored", "{:.1f}"),
    ("stored_bytes", "bytes stored (tables, indexes, TOAST)", "{:,.0f}"),
    ("broker_messages", "broker messages (task messages published)", "{:.1f}"),
    ("redis_commands", "Redis commands", "{:.1f}"),
    ("worker_cpu_ms", "worker CPU ms", "{:.2f}"),
    ("postgres_cpu_ms", "PostgreSQL CPU ms", "{:.2f}"),
    ("redis_cpu_ms", "Redis CPU ms", "{:.2f}"),
    ("web_cpu_ms", "web process CPU ms (start and answer calls)", "{:.2f}"),
]


COLUMN_NAMES = {
    "auto": "approved without asking",
    "manager": "asking a manager",
    "auto_per_task": "approved without asking, new connection per task",
}


def _median_rate(runs: list[dict[str, float]]) -> float:
    return statistics.median(r["per_second"] for r in runs)


@dataclass(frozen=True)
class Costs:
    manager: dict[str, float]  # the path the plan is for: asking a manager
    auto: dict[str, float]  # the path the throughput runs take
    round_trip_ms: float  # a small write transaction from the bench: round trip and flush
    cores: int

    @classmethod
    def from_results(cls, results: dict[str, Any]) -> Costs:
        return cls(
            manager=results["costs"]["manager"],
            auto=results["costs"]["auto"],
            round_trip_ms=results["commit_latency_ms"],
            cores=int(results["machine"].split("cores: ")[1].split()[0]),
        )

    @staticmethod
    def cpu_ms(path: dict[str, float]) -> float:
        """CPU of every process an invocation of `path` needs in the back end (worker,
        PostgreSQL, Redis): what bounds throughput once the cores are busy."""
        return sum(path[k] for k in ("worker_cpu_ms", "postgres_cpu_ms", "redis_cpu_ms"))

    def serial_ms(self, path: dict[str, float]) -> float:
        """One worker process's time per invocation of `path`: its CPU, the servers' CPU
        it waits for, and a round trip per transaction."""
        return self.cpu_ms(path) + path["transactions"] * self.round_trip_ms


def model_line(costs: Costs, max_workers: int) -> dict[float, float]:
    """Completed invocations per second of the auto path against worker processes: each
    worker adds 1000 / serial_ms until the machine's cores are spent (cores x 1000 ms / the
    CPU ms an invocation costs in all processes)."""
    per_worker = 1000 / costs.serial_ms(costs.auto)
    ceiling = costs.cores * 1000 / costs.cpu_ms(costs.auto)
    steps = [i / 4 for i in range(4, 4 * max_workers + 1)]
    return {n: min(n * per_worker, ceiling) for n in steps}


def _markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report_tables(results: dict[str, Any]) -> str:
    costs = results["costs"]
    columns = [c for c in ("auto", "manager", "auto_per_task") if c in costs]
    rows = [[label, *(fmt.format(costs[c][key]) for c in columns)] for key, label, fmt in COST_ROWS]
    lines = [
        results["machine"],
        "",
        f"Per completed `expense_approval` invocation ({costs['auto']['invocations']:.0f} of "
        "each path, one `celery worker -P solo`, connections kept unless the column says):",
        "",
        _markdown(["cost", *(COLUMN_NAMES[c] for c in columns)], rows),
        "",
        f"A bare BEGIN; INSERT; COMMIT from the bench: {results['commit_latency_ms']:.2f} ms.",
        "",
        "Throughput, approved without asking (completed invocations / s, median of rounds):",
        "",
    ]
    throughput = results["throughput"]
    table = []
    for workers in sorted(throughput["kept"], key=int):
        kept, per_task = throughput["kept"][workers], throughput["per_task"][workers]
        table.append(
            [
                workers,
                f"{_median_rate(kept):.1f}",
                " / ".join(f"{r['per_second']:.1f}" for r in kept),
                f"{_median_rate(per_task):.1f}",
                " / ".join(f"{r['per_second']:.1f}" for r in per_task),
                f"{_median_rate(kept) / _median_rate(per_task):.2f}",
                f"{statistics.median(r.get('cores_used', float('nan')) for r in kept):.2f}",
            ]
        )
    lines.append(
        _markdown(
            [
                "worker processes",
                "kept (default)",
                "rounds",
                "new per task",
                "rounds",
                "kept / new",
                "cores used (kept)",
            ],
            table,
        )
    )
    start, end = (
        " / ".join(f"{v:.1f}" for v in results[key])
        for key in ("load_average_start", "load_average_end")
    )
    lines += ["", f"Load average (1 / 5 / 15 min) at start {start}, at end {end}."]
    return "\n".join(lines)


def model_summary(costs: Costs) -> str:
    auto = costs.auto
    return (
        f"Model (auto path): one worker {costs.serial_ms(auto):.1f} ms per invocation "
        f"({1000 / costs.serial_ms(auto):.0f}/s), CPU of all processes "
        f"{costs.cpu_ms(auto):.1f} ms, so {costs.cores} cores cap it at "
        f"{costs.cores * 1000 / costs.cpu_ms(auto):.0f}/s. Asking a manager: "
        f"{costs.serial_ms(costs.manager):.1f} ms of a worker, "
        f"{costs.cpu_ms(costs.manager):.1f} ms of CPU."
    )


def plan_rows(costs: Costs) -> str:
    """What a deployment needs at each of RATES, from the per-invocation costs of the path
    that asks a manager."""
    c = costs.manager
    rows = []
    for rate in RATES:
        rows.append(
            [
                f"{rate:,}",
                f"{rate * c['write_transactions']:,.0f}",
                f"{rate * c['wal_bytes_lsn'] / 1e6:,.1f}",
                f"{rate * c['stored_bytes'] * 86400 / 1e9:,.0f}",
                f"{rate * c['postgres_cpu_ms'] / 1000:,.1f}",
                f"{rate * costs.serial_ms(c) / 1000:,.0f}",
                f"{rate * c['worker_cpu_ms'] / 1000:,.1f}",
                f"{rate * c['broker_messages']:,.0f}",
                f"{rate * c['redis_commands']:,.0f}",
                f"{rate * c['redis_cpu_ms'] / 1000:,.2f}",
                f"{rate * c['web_cpu_ms'] / 1000:,.1f}",
            ]
        )
    return _markdown(
        [
            "completed / s",
            "write commits / s",
            "WAL MB/s",
            "GB stored / day",
            "PostgreSQL cores",
            "worker processes",
            "worker cores",
            "broker messages / s",
            "Redis commands / s",
            "Redis cores",
            "web cores",
        ],
        rows,
    )


# --- the plot -----------------------------------------------------------------------------

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 60
COLOURS = {"kept": "#1f77b4", "per_task": "#d62728", "model": "#555555"}


def _nice_top(value: float) -> float:
    """The smallest of 1, 2 or 5 x a power of ten, times 5 (five grid steps), above value."""
    step = 1.0
    while step * 5 < value:
        step *= 2 if str(step).startswith(("1", "5")) else 2.5
    return step * 5


def write_svg(
    results: dict[str, Any], line: dict[float, float], name: str = "capacity.svg"
) -> None:
    """Measured points (connections kept; a new one per task) and the model's line."""
    throughput = results["throughput"]
    points = {
        key: {int(w): _median_rate(runs) for w, runs in throughput[key].items()}
        for key in ("kept", "per_task")
    }
    max_x = max(max(line), *points["kept"])
    top = _nice_top(max(*line.values(), *points["kept"].values(), *points["per_task"].values()))

    def x(value: float) -> float:
        return LEFT + (value - 0.5) / (max_x - 0.5 + 0.5) * (WIDTH - LEFT - RIGHT)

    def y(value: float) -> float:
        return HEIGHT - BOTTOM - value / top * (HEIGHT - TOP - BOTTOM)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
        "Completed invocations / s against worker processes (PostgreSQL + Redis)</text>",
    ]
    for i in range(6):  # horizontal grid and y labels
        value = top * i / 5
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            'stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{LEFT - 8}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    for n in range(1, int(max_x) + 1):  # x ticks
        parts.append(
            f'<text x="{x(n):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{n}</text>'
        )
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 22}" text-anchor="middle">'
        "celery worker processes (-P solo), 2 cores shared with PostgreSQL and Redis</text>"
    )
    parts.append(
        f'<text transform="translate(18 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
        'text-anchor="middle">completed / s</text>'
    )
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x(n):.1f},{y(v):.1f}" for i, (n, v) in enumerate(line.items())
    )
    parts.append(
        f'<path d="{path}" fill="none" stroke="{COLOURS["model"]}" stroke-width="2" '
        'stroke-dasharray="6 4"/>'
    )
    for key, marker in (("kept", "circle"), ("per_task", "square")):
        for n, v in sorted(points[key].items()):
            if marker == "circle":
                parts.append(
                    f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="5" fill="{COLOURS[key]}"/>'
                )
            else:
                parts.append(
                    f'<rect x="{x(n) - 4.5:.1f}" y="{y(v) - 4.5:.1f}" width="9" height="9" '
                    f'fill="{COLOURS[key]}"/>'
                )
            label_y = y(v) - 8 if key == "kept" else y(v) + 16
            parts.append(
                f'<text x="{x(n) + 8:.1f}" y="{label_y:.1f}" fill="{COLOURS[key]}">{v:.0f}</text>'
            )
    legend = [
        ("model", "model from the costs: n / one worker's time, capped by cores / CPU"),
        ("kept", "measured, connections kept (default)"),
        ("per_task", "measured, a new connection per task (WORKER_CONN_MAX_AGE=0)"),
    ]
    for i, (key, text) in enumerate(legend):
        ly = TOP + 8 + i * 18
        parts.append(
            f'<rect x="{LEFT + 12}" y="{ly - 8}" width="14" height="4" fill="{COLOURS[key]}"/>'
        )
        parts.append(f'<text x="{LEFT + 32}" y="{ly}">{text}</text>')
    parts.append("</svg>")
    (IMG / name).write_text("\n".join(parts) + "\n")
