"""The plots of docs/performance.md: lines of (x, y) points, one per system or setting."""

from __future__ import annotations

from pathlib import Path

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def line_plot(
    series: dict[str, dict[float, float]],
    name: str,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    log: bool,
    size: tuple[float, float] = (8, 5),
) -> None:
    """Draw each series ({x: y}, in x order) and write docs/img/`name`; `log`: both axes
    log-scaled, else the x values are the ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=size)
    for label, points in series.items():
        if points:
            xs = sorted(points)
            axes.plot(xs, [points[x] for x in xs], marker="o", label=label)
            if not log:
                axes.set_xticks(xs)
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
