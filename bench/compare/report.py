"""Tables and plots from a comparison's results (bench/compare/run.py, scale.py)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
IMG = ROOT / "docs" / "img"
CHAIN_NODES = 11  # start -> interrupt: 10 chain nodes and the asking node
CYCLE_NODES = 12  # and the node after the answer


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.3f}" if value < 0.001 else f"{value * 1000:.2f}"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"


def _series(data: dict[str, Any], name: str, workload: str) -> list[Any]:
    return data["runs"].get(name, {}).get(workload, [])


def _per_round_ratio(
    data: dict[str, Any], name: str, base: str, workload: str, pick: Any
) -> float | None:
    """Median over rounds of (this system's block median / the baseline's, same round)."""
    mine, theirs = _series(data, name, workload), _series(data, base, workload)
    ratios = [
        statistics.median(pick(a)) / statistics.median(pick(b))
        for a, b in zip(mine, theirs, strict=False)
        if pick(a) and pick(b)
    ]
    return statistics.median(ratios) if ratios else None


def chain_interrupt_rows(data: dict[str, Any], configs: list[Any]) -> list[list[str]]:
    def per_node(block: dict[str, Any]) -> list[float]:
        return [start / CHAIN_NODES for start, _ in block["result"]]

    def resume(block: dict[str, Any]) -> list[float]:
        return [r for _, r in block["result"]]

    rows = []
    for config in configs:
        blocks = _series(data, config.name, "chain_interrupt")
        if not blocks:
            continue
        nodes = [s for b in blocks for s in per_node(b)]
        resumes = [s for b in blocks for s in resume(b)]
        commits = [b["commits"] for b in blocks if b["commits"] is not None]
        cycles = sum(len(b["result"]) for b in blocks)
        per_cycle = sum(commits) / cycles if commits else None
        base = config.baseline
        rows.append(
            [
                config.name,
                ms(statistics.median(nodes)),
                ms(pct(nodes, 99)),
                ms(statistics.median(resumes)),
                ms(pct(resumes, 99)),
                "-" if per_cycle is None else f"{per_cycle / CYCLE_NODES:.2f}",
                ratio(
                    base and _per_round_ratio(data, config.name, base, "chain_interrupt", per_node)
                ),
                ratio(
                    base and _per_round_ratio(data, config.name, base, "chain_interrupt", resume)
                ),
            ]
        )
    return rows


def chain_rows(data: dict[str, Any], configs: list[Any], size: int) -> list[list[str]]:
    def per_node(block: dict[str, Any]) -> list[float]:
        return [t / size for t in block["result"]]

    rows = []
    for config in configs:
        blocks = _series(data, config.name, f"chain{size}")
        if not blocks:
            continue
        samples = [s for b in blocks for s in per_node(b)]
        commits = [b["commits"] for b in blocks if b["commits"] is not None]
        runs = sum(len(b["result"]) for b in blocks)
        base = config.baseline
        rows.append(
            [
                config.name,
                ms(statistics.median(samples)),
                ms(max(samples)),
                "-" if not commits else f"{sum(commits) / runs / size:.2f}",
                str(len(samples)),
                ratio(base and _per_round_ratio(data, config.name, base, f"chain{size}", per_node)),
            ]
        )
    return rows


def fanout_rows(data: dict[str, Any], configs: list[Any]) -> list[list[str]]:
    def answers(block: dict[str, Any]) -> list[float]:
        return block["result"][1]

    rows = []
    for config in configs:
        blocks = _series(data, config.name, "fanout100")
        if not blocks:
            continue
        starts = [b["result"][0] / 100 for b in blocks]
        samples = [s for b in blocks for s in answers(b)]
        base = config.baseline
        rows.append(
            [
                config.name,
                ms(statistics.median(starts)),
                ms(statistics.median(samples)),
                ms(pct(samples, 99)),
                ratio(base and _per_round_ratio(data, config.name, base, "fanout100", answers)),
            ]
        )
    return rows


def history_windows(block: dict[str, Any]) -> dict[str, list[float]]:
    points = sorted(int(k) for k in block["result"])
    size = points[-1]
    found: dict[str, list[float]] = {"first": [], "100th": [], "last": []}
    for point in points:
        key = "first" if point <= 10 else "last" if point > size - 10 else "100th"
        found[key].append(block["result"][str(point)])
    return found


def history_rows(data: dict[str, Any], configs: list[Any]) -> list[list[str]]:
    rows = []
    for config in configs:
        workloads = [w for w in data["runs"].get(config.name, {}) if w.startswith("history")]
        for workload in workloads:
            windows: dict[str, list[float]] = {"first": [], "100th": [], "last": []}
            for block in data["runs"][config.name][workload]:
                for key, values in history_windows(block).items():
                    windows[key] += values
            first = statistics.median(windows["first"])
            last = statistics.median(windows["last"])
            rows.append(
                [
                    config.name,
                    workload.removeprefix("history"),
                    ms(first),
                    ms(statistics.median(windows["100th"])) if windows["100th"] else "-",
                    ms(last),
                    f"{last / first:.2f}",
                ]
            )
    return rows


def _ratio_of(data: dict[str, Any], name: str, base: str, workload: str, which: str) -> Any:
    """Median over rounds of (name's block median / base's): per node or resume."""
    if workload == "chain_interrupt":
        index = 0 if which == "node" else 1
        return _per_round_ratio(
            data, name, base, workload, lambda b: [c[index] for c in b["result"]]
        )
    return _per_round_ratio(data, name, base, workload, lambda b: b["result"])


def target_rows(data: dict[str, Any]) -> list[list[str]]:
    """The issue's targets against this run: each ratio is the other system's time over
    ours (at least 2 means "at most half"), growth is last 10 over first 10 resumes."""
    rows = []

    def verdict(value: Any, wanted: float, at_most: bool = False) -> str:
        if value is None:
            return "not measured"
        return "met" if (value <= wanted if at_most else value >= wanted) else "missed"

    pairs = [
        ("PostgreSQL: at most half of PostgresSaver sync", "hitl PostgreSQL", 2.0),
        (
            "PostgreSQL (prepared): at most half of PostgresSaver sync",
            "hitl PostgreSQL prepared",
            2.0,
        ),
        ("SQLite: at most half of SqliteSaver sync", "hitl SQLite", 2.0),
        ("in memory: 10x under InMemorySaver", "hitl memory", 10.0),
        ("10x under ADK DatabaseSessionService (SQLite)", "hitl SQLite", 10.0),
    ]
    others = {
        "hitl PostgreSQL": "LangGraph PostgresSaver sync",
        "hitl PostgreSQL prepared": "LangGraph PostgresSaver sync",
        "hitl SQLite": "LangGraph SqliteSaver sync",
        "hitl memory": "LangGraph InMemorySaver",
    }
    for label, ours, wanted in pairs:
        other = "ADK DatabaseSessionService SQLite" if "ADK" in label else others[ours]
        for workload, which, what in (
            ("chain_interrupt", "node", "per node, 10-node chain"),
            ("chain_interrupt", "resume", "resume, 10-node chain"),
            ("chain100", "node", "per node, chain of 100"),
            ("chain1000", "node", "per node, chain of 1,000"),
        ):
            value = _ratio_of(data, other, ours, workload, which)
            shown = "-" if value is None else f"{value:.1f}x"
            rows.append([label, what, shown, verdict(value, wanted)])
    for name in ("hitl memory", "hitl SQLite", "hitl PostgreSQL", "hitl PostgreSQL prepared"):
        for workload, blocks in data["runs"].get(name, {}).items():
            if not workload.startswith("history"):
                continue
            windows: dict[str, list[float]] = {"first": [], "100th": [], "last": []}
            for block in blocks:
                for key, values in history_windows(block).items():
                    windows[key] += values
            growth = statistics.median(windows["last"]) / statistics.median(windows["first"])
            rows.append(
                [
                    f"{name}: resume of the 1,000th within 20% of the first",
                    "last 10 / first 10",
                    f"{growth:.2f}",
                    verdict(growth, 1.2, at_most=True),
                ]
            )
    return rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line(data: dict[str, Any]) -> str:
    m = data["machine"]
    load = lambda k: ", ".join(f"{x:.2f}" for x in m.get(k, ()))  # noqa: E731
    return (
        f"Machine: {m['platform']}, Python {m['python']}, {m['cpu']}, {m['cores']} cores; "
        f"PostgreSQL {m.get('postgresql')} (synchronous_commit={m.get('synchronous_commit')}), "
        f"SQLite {m['sqlite']}; Django {m['django']}, psycopg {m['psycopg']}, LangGraph "
        f"{m['langgraph']} (checkpoint-postgres {m['langgraph-checkpoint-postgres']}, "
        f"checkpoint-sqlite {m['langgraph-checkpoint-sqlite']}), google-adk {m['google-adk']}. "
        f"Load average at start {load('load_average_start')}, at end {load('load_average_end')}."
    )


def tables(data: dict[str, Any], configs: list[Any]) -> str:
    parts = [machine_line(data), ""]
    targets = target_rows(data)
    if targets:
        parts += [
            "### Targets (ratios: the other system's time over ours, median of per-round ratios)",
            "",
            markdown(["target", "measure", "this run", "verdict"], targets),
            "",
        ]
    rows = chain_interrupt_rows(data, configs)
    if rows:
        parts += [
            "### 10-node chain, interrupt, answer, one more node",
            "",
            markdown(
                [
                    "system",
                    "per node ms",
                    "p99",
                    "resume ms",
                    "p99",
                    "commits/node",
                    "x ours/node",
                    "x ours/resume",
                ],
                rows,
            ),
            "",
        ]
    for size in (100, 1000):
        rows = chain_rows(data, configs, size)
        if rows:
            parts += [
                f"### Chain of {size:,} nodes, start to finish",
                "",
                markdown(["system", "per node ms", "max", "commits/node", "runs", "x ours"], rows),
                "",
            ]
    rows = fanout_rows(data, configs)
    if rows:
        parts += [
            "### 100-wide fan-out, every branch asks, answered one at a time",
            "",
            markdown(["system", "start per branch ms", "answer ms", "p99", "x ours/answer"], rows),
            "",
        ]
    rows = history_rows(data, configs)
    if rows:
        parts += [
            "### Resume latency against earlier invocations in the session",
            "",
            markdown(
                ["system", "invocations", "first 10 ms", "~100th ms", "last 10 ms", "last/first"],
                rows,
            ),
            "",
        ]
    return "\n".join(parts)


def _replace_section(text: str, marker: str, body: str) -> str:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def write_section(marker: str, body: str) -> None:
    DOC.write_text(_replace_section(DOC.read_text(), marker, body))


def write_docs(data: dict[str, Any], configs: list[Any], body: str) -> None:
    write_section("compare", body)
    plot_per_node(data, configs)
    plot_history(data, configs)


def _plot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(
    plt: Any, figure: Any, axes: Any, name: str, *, title: str, xlabel: str, ylabel: str, log: bool
) -> None:
    """Label the plot, write it to docs/img/`name` and free it; `log`: both axes log-scaled."""
    if log:
        axes.set_xscale("log")
        axes.set_yscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, which="both" if log else "major", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(IMG / name, dpi=110)
    plt.close(figure)


def plot_per_node(data: dict[str, Any], configs: list[Any]) -> None:
    plt = _plot()
    figure, axes = plt.subplots(figsize=(8, 5))
    for config in configs:
        runs = data["runs"].get(config.name, {})
        xs, ys = [], []
        if runs.get("chain_interrupt"):
            samples = [s / CHAIN_NODES for b in runs["chain_interrupt"] for s, _ in b["result"]]
            xs.append(11)
            ys.append(statistics.median(samples) * 1000)
        for size in (100, 1000):
            if runs.get(f"chain{size}"):
                samples = [t / size for b in runs[f"chain{size}"] for t in b["result"]]
                xs.append(size)
                ys.append(statistics.median(samples) * 1000)
        if xs:
            axes.plot(xs, ys, marker="o", label=config.name)
    _save(
        plt,
        figure,
        axes,
        "perf-per-node.png",
        title="Per-node cost against chain length",
        xlabel="nodes in the chain (11: the 10-node chain and its asking node)",
        ylabel="ms per node (median)",
        log=True,
    )


def plot_history(data: dict[str, Any], configs: list[Any]) -> None:
    plt = _plot()
    figure, axes = plt.subplots(figsize=(8, 5))
    for config in configs:
        runs = data["runs"].get(config.name, {})
        for workload, blocks in runs.items():
            if not workload.startswith("history"):
                continue
            size = int(workload.removeprefix("history"))
            windows: dict[str, list[float]] = {"first": [], "100th": [], "last": []}
            for block in blocks:
                for key, values in history_windows(block).items():
                    windows[key] += values
            points = {1: windows["first"], 100: windows["100th"], size: windows["last"]}
            xs = sorted(x for x, values in points.items() if values)
            ys = [statistics.median(points[x]) * 1000 for x in xs]
            axes.plot(xs, ys, marker="o", label=config.name)
    _save(
        plt,
        figure,
        axes,
        "perf-resume-history.png",
        title="Resume latency against session history",
        xlabel="invocations in the session so far (median of a window of 10)",
        ylabel="resume ms",
        log=True,
    )


def plot_throughput(series: dict[str, dict[str, Any]]) -> None:
    plt = _plot()
    figure, axes = plt.subplots(figsize=(6, 4))
    for label, results in series.items():
        workers = sorted(int(w) for w in results)
        if workers:
            rates = [results[str(w)]["per_second"] for w in workers]
            axes.plot(workers, rates, marker="o", label=label)
            axes.set_xticks(workers)
    _save(
        plt,
        figure,
        axes,
        "perf-throughput.png",
        title="Throughput on PostgreSQL + Redis",
        xlabel="celery worker processes",
        ylabel="completed invocations / s",
        log=False,
    )


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
    reuse = results.get("throughput_reuse", {})
    if throughput:
        rows = []
        for workers, r in sorted(throughput.items(), key=lambda kv: int(kv[0])):
            other = reuse.get(workers)
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
                    "completed / s (Celery default)",
                    "completed / s (CELERY_DB_REUSE_MAX)",
                ],
                rows,
            ),
            "",
        ]
        plot_throughput(
            {
                "Celery default (new connection per task)": throughput,
                "CELERY_DB_REUSE_MAX=1000": reuse,
            }
        )
    load = results.get("load_average_start"), results.get("load_average_end")
    lines.append(f"Load average at start {load[0]}, at end {load[1]}.")
    return "\n".join(lines)
