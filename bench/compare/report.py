"""Tables and plots of a comparison's results (bench/compare/run.py), and the writing of
generated sections into docs/performance.md."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from bench.common import percentile
from bench.compare.plots import line_plot

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
CHAIN_NODES = 11  # start -> interrupt: 10 chain nodes and the asking node
CYCLE_NODES = 12  # and the node after the answer
VENDOR = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


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
                ms(percentile(nodes, 99)),
                ms(statistics.median(resumes)),
                ms(percentile(resumes, 99)),
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


def per_node_medians(data: dict[str, Any], name: str) -> dict[int, float]:
    """{nodes in the chain: median seconds per node} of a system's chain workloads (11: the
    10-node chain and its asking node, start to interrupt)."""
    runs = data["runs"].get(name, {})
    found = {}
    if runs.get("chain_interrupt"):
        found[CHAIN_NODES] = statistics.median(
            s / CHAIN_NODES for b in runs["chain_interrupt"] for s, _ in b["result"]
        )
    for size in (100, 1000):
        if runs.get(f"chain{size}"):
            found[size] = statistics.median(
                t / size for b in runs[f"chain{size}"] for t in b["result"]
            )
    return found


def floors(data: dict[str, Any], configs: list[Any]) -> dict[str, list[float]]:
    """The bare commits measured on each backend (seconds)."""
    found: dict[str, list[float]] = {}
    for config in configs:
        for block in _series(data, config.name, "commit"):
            found.setdefault(config.backend, []).extend(block["result"])
    return found


def floor_rows(data: dict[str, Any], configs: list[Any]) -> list[list[str]]:
    """Per node in bare commits of the same database: what a transition costs on top."""
    floor = {backend: statistics.median(s) for backend, s in floors(data, configs).items()}
    rows = []
    for config in configs:
        medians = per_node_medians(data, config.name)
        if config.backend not in floor or not medians:
            continue
        cells = [config.name]
        for size in (CHAIN_NODES, 100, 1000):
            value = medians.get(size)
            cells += (
                ["-", "-"] if value is None else [ms(value), f"{value / floor[config.backend]:.1f}"]
            )
        rows.append(cells)
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
                ms(percentile(samples, 99)),
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


def pooled_windows(blocks: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The resumes of every round's windows, pooled: first 10, around the 100th, last 10."""
    pooled: dict[str, list[float]] = {"first": [], "100th": [], "last": []}
    for block in blocks:
        for key, values in history_windows(block).items():
            pooled[key] += values
    return pooled


def history_rows(data: dict[str, Any], configs: list[Any]) -> list[list[str]]:
    rows = []
    for config in configs:
        workloads = [w for w in data["runs"].get(config.name, {}) if w.startswith("history")]
        for workload in workloads:
            windows = pooled_windows(data["runs"][config.name][workload])
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
    """The targets against this run: each ratio is the other system's time over
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
        ("PostgreSQL async: at most half of PostgresSaver async", "hitl PostgreSQL async", 2.0),
        ("SQLite: at most half of SqliteSaver sync", "hitl SQLite", 2.0),
        ("in memory: 10x under InMemorySaver", "hitl memory", 10.0),
        ("10x under ADK DatabaseSessionService (SQLite)", "hitl SQLite", 10.0),
    ]
    others = {
        "hitl PostgreSQL": "LangGraph PostgresSaver sync",
        "hitl PostgreSQL prepared": "LangGraph PostgresSaver sync",
        "hitl PostgreSQL async": "LangGraph PostgresSaver async",
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
            windows = pooled_windows(blocks)
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
    rows = floor_rows(data, configs)
    if rows:
        measured = ", ".join(
            f"{VENDOR[backend]} {ms(statistics.median(s))} ms (p99 {ms(percentile(s, 99))})"
            for backend, s in floors(data, configs).items()
        )
        parts += [
            "### Per node against the floor: a bare commit on the same database",
            "",
            "A bare commit (`BEGIN`, an `INSERT` of one small row and `COMMIT` as raw SQL on "
            f"this project's connection; median): {measured}. Every system here commits each "
            "node transition before the next node starts, so a node costs at least one; "
            "*x commit* is the per-node cost over one bare commit of its database.",
            "",
            markdown(
                [
                    "system",
                    "per node ms, 10-node chain",
                    "x commit",
                    "chain of 100",
                    "x commit",
                    "chain of 1,000",
                    "x commit",
                ],
                rows,
            ),
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
    """The comparison's tables into docs/performance.md, its plots into docs/img."""
    write_section("compare", body)
    per_node = {c.name: per_node_medians(data, c.name) for c in configs}
    line_plot(
        {name: {x: s * 1000 for x, s in medians.items()} for name, medians in per_node.items()},
        "perf-per-node.png",
        title="Per-node cost against chain length",
        xlabel="nodes in the chain (11: the 10-node chain and its asking node)",
        ylabel="ms per node (median)",
        log=True,
    )
    history: dict[str, dict[float, float]] = {}
    for config in configs:
        for workload, blocks in data["runs"].get(config.name, {}).items():
            if workload.startswith("history"):
                windows = pooled_windows(blocks)
                at = {1: "first", 100: "100th", int(workload.removeprefix("history")): "last"}
                history[config.name] = {
                    x: statistics.median(windows[key]) * 1000
                    for x, key in at.items()
                    if windows[key]
                }
    line_plot(
        history,
        "perf-resume-history.png",
        title="Resume latency against session history",
        xlabel="invocations in the session so far (median of a window of 10)",
        ylabel="resume ms",
        log=True,
    )
