"""The approvals dashboard's pictures: pure functions from its figures (approvals.figures)
to SVG markup, drawn on the server (no script, no chart library).

Each chart is a horizontal bar chart one `WIDTH` wide in its viewBox, so it scales to the
page from a phone to a desktop; every bar is labelled in words above it (the numbers are
in the text, never only in a length or a colour), and is a list item with an aria-label
for screen readers. The colours are the Okabe-Ito palette, told apart with the common
kinds of colour blindness; the labels follow the page's text colour (dark mode too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from html import escape

from workflows.admin.display import human_duration
from workflows.engine.escalation import PRIORITIES

from .figures import Approver, RubberStampRule, Timing, WorkflowLoad

WIDTH = 480
BAR = 18  # a bar's height
ROW = 46  # a label line and its bar
TOP = 12  # room above the first row
SMALLEST_LABELLED = 22  # narrower segments carry no number (the row's label has it)

SKY_BLUE, BLUE, ORANGE, VERMILLION, GREY = "#56B4E9", "#0072B2", "#E69F00", "#D55E00", "#BBBBBB"
# (fill, text on it): dark text where white would be too faint.
PRIORITY_COLOURS = {
    "low": (SKY_BLUE, "#000"),
    "normal": (BLUE, "#fff"),
    "high": (ORANGE, "#000"),
    "urgent": (VERMILLION, "#000"),
}
# Time axis ticks (seconds, label): a log scale, so seconds and days fit one picture.
TICKS = ((1, "1 s"), (60, "1 min"), (3600, "1 h"), (86400, "1 day"), (604800, "1 week"))


@dataclass(frozen=True)
class Segment:
    width: float
    fill: str
    ink: str  # the colour of the number written on it
    label: str  # what it is, for its aria-label and tooltip
    text: str = ""  # the number written on it ("" for none)


def _attrs(**attributes: object) -> str:
    return "".join(
        f' {name.rstrip("_").replace("_", "-")}="{escape(str(value))}"'
        for name, value in attributes.items()
    )


def _n(number: float) -> str:
    return f"{number:.1f}".rstrip("0").rstrip(".")


def _svg(chart_id: str, title: str, description: str, height: float, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="hitl-chart"'
        f"{_attrs(id=chart_id, viewBox=f'0 0 {WIDTH} {_n(height)}', role='group')}"
        f"{_attrs(aria_labelledby=f'{chart_id}-title', aria_describedby=f'{chart_id}-desc')}>"
        f'<title id="{chart_id}-title">{escape(title)}</title>'
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>'
        f"{''.join(body)}</svg>"
    )


def _label(x: float, y: float, text: str, **attributes: object) -> str:
    return (
        f"<text{_attrs(x=_n(x), y=_n(y), fill='currentColor', **attributes)}>{escape(text)}</text>"
    )


def _bar_row(
    y: float, label: str, summary: str, segments: Sequence[Segment], mark: str = ""
) -> str:
    """One row: its label line, then the bar's segments from the left on a faint track.
    `mark` outlines the bar and follows the label in bold (colour is never the only sign)."""
    flag = f' <tspan font-weight="bold">{escape(mark)}</tspan>' if mark else ""
    parts = [
        f"<text{_attrs(x=0, y=_n(y + 13), fill='currentColor', font_size=13)}"
        f' aria-hidden="true">{escape(label)}{flag}</text>'
    ]
    bar_y = y + 20
    parts.append(
        f"<rect{_attrs(x=0, y=_n(bar_y), width=WIDTH, height=BAR, fill='currentColor')}"
        ' fill-opacity="0.08"/>'
    )
    x = 0.0
    for segment in segments:
        if segment.width <= 0:
            continue
        parts.append(
            f"<rect{_attrs(x=_n(x), y=_n(bar_y), width=_n(segment.width), height=BAR)}"
            f"{_attrs(fill=segment.fill)}><title>{escape(segment.label)}</title></rect>"
        )
        if segment.text and segment.width >= SMALLEST_LABELLED:
            parts.append(
                f"<text{_attrs(x=_n(x + segment.width / 2), y=_n(bar_y + 13), fill=segment.ink)}"
                f' font-size="12" text-anchor="middle" aria-hidden="true">'
                f"{escape(segment.text)}</text>"
            )
        x += segment.width
    if mark:
        parts.append(
            f"<rect{_attrs(x=1, y=_n(bar_y - 1), width=WIDTH - 2, height=BAR + 2)}"
            f' fill="none" stroke="{VERMILLION}" stroke-width="2" stroke-dasharray="5 3"/>'
        )
    return f'<g role="listitem"{_attrs(aria_label=summary)}>{"".join(parts)}</g>'


def _rows(rows: list[str]) -> str:
    return f'<g role="list">{"".join(rows)}</g>'


def _legend(y: float, items: Sequence[tuple[str, str]]) -> str:
    step = WIDTH / len(items)
    parts = []
    for index, (fill, text) in enumerate(items):
        x = index * step
        parts.append(f"<rect{_attrs(x=_n(x), y=_n(y), width=12, height=12, fill=fill)}/>")
        parts.append(_label(x + 17, y + 11, text, font_size=12))
    return f'<g aria-hidden="true">{"".join(parts)}</g>'


def _nothing(chart_id: str, title: str, message: str) -> str:
    return _svg(chart_id, title, message, 40, [_label(0, 25, message, font_size=13)])


def open_by_age_chart(open_by_age: dict[str, dict[str, int]], chart_id: str = "open-by-age") -> str:
    """Open questions per age bucket, each bar stacked by priority (urgent last)."""
    title = "Open questions by age and priority"
    totals = {bucket: sum(counts.values()) for bucket, counts in open_by_age.items()}
    if not any(totals.values()):
        return _nothing(chart_id, title, "No open questions.")
    scale = WIDTH / max(totals.values())
    legend = [(PRIORITY_COLOURS[p][0], p) for p in PRIORITIES]
    rows = []
    for index, (bucket, counts) in enumerate(open_by_age.items()):
        parts = ", ".join(f"{counts[p]} {p}" for p in PRIORITIES if counts[p])
        summary = f"{bucket}: {totals[bucket]} open" + (f" ({parts})" if parts else "")
        segments = [
            Segment(
                counts[p] * scale,
                *PRIORITY_COLOURS[p],
                f"{bucket}, {p}: {counts[p]}",
                str(counts[p]),
            )
            for p in PRIORITIES
        ]
        rows.append(_bar_row(TOP + 24 + index * ROW, summary, summary, segments))
    description = f"{sum(totals.values())} open questions; one bar per age, its parts by priority."
    height = TOP + 24 + len(rows) * ROW
    return _svg(chart_id, title, description, height, [_legend(TOP - 6, legend), _rows(rows)])


def overdue_chart(load: Sequence[WorkflowLoad], chart_id: str = "overdue") -> str:
    """Per workflow, its open questions, the overdue ones (past their due date) first."""
    title = "Overdue questions per workflow"
    if not load:
        return _nothing(chart_id, title, "No open questions.")
    scale = WIDTH / max(row.open for row in load)
    rows = []
    for index, row in enumerate(load):
        summary = f"{row.workflow}: {row.overdue} of {row.open} open overdue"
        segments = [
            Segment(row.overdue * scale, VERMILLION, "#000", "overdue", str(row.overdue)),
            Segment((row.open - row.overdue) * scale, GREY, "#000", "on time"),
        ]
        rows.append(_bar_row(TOP + 24 + index * ROW, summary, summary, segments))
    legend = [(VERMILLION, "overdue"), (GREY, "open, not yet due")]
    description = (
        f"{sum(r.overdue for r in load)} of {sum(r.open for r in load)} open questions are overdue."
    )
    height = TOP + 24 + len(rows) * ROW
    return _svg(chart_id, title, description, height, [_legend(TOP - 6, legend), _rows(rows)])


def _axis_end(longest: float) -> int:
    """The first tick at or past `longest` seconds (the last tick at most)."""
    return next((seconds for seconds, _ in TICKS if seconds >= longest), TICKS[-1][0])


def _time_axis(top: float, y: float, end: int) -> str:
    """Gridlines from `top` down to `y`, each tick's label under it."""
    parts = []
    for seconds, text in TICKS:
        if seconds > end:
            break
        x = WIDTH * math.log(seconds) / math.log(end) if end > 1 else 0
        anchor = "start" if seconds == 1 else ("end" if seconds == end else "middle")
        parts.append(
            f'<line{_attrs(x1=_n(x), x2=_n(x), y1=_n(top), y2=_n(y))} stroke="currentColor"'
            ' stroke-opacity="0.25"/>'
        )
        parts.append(_label(x, y + 14, text, font_size=12, text_anchor=anchor))
    return f'<g aria-hidden="true">{"".join(parts)}</g>'


def timing_chart(timings: Sequence[tuple[str, Timing]], chart_id: str, title: str) -> str:
    """Time to decision per row (a workflow or an approver): a dark bar to the median, a
    light one to the 90th percentile, on a log scale from one second."""
    if not timings:
        return _nothing(chart_id, title, "No decisions in this period.")
    end = max(_axis_end(max(timing.p90 for _, timing in timings)), 60)

    def x(seconds: float) -> float:
        return WIDTH * math.log(max(seconds, 1)) / math.log(end)

    rows = []
    for index, (name, timing) in enumerate(timings):
        median, p90 = (
            human_duration(timedelta(seconds=timing.median)),
            human_duration(timedelta(seconds=timing.p90)),
        )
        decisions = f"{timing.decisions} decision{'s' if timing.decisions != 1 else ''}"
        summary = f"{name}: median {median}, 90th percentile {p90} ({decisions})"
        median_width = max(x(timing.median), 2)
        segments = [
            Segment(median_width, BLUE, "#fff", f"median {median}"),
            Segment(max(x(timing.p90) - median_width, 0), SKY_BLUE, "#000", f"p90 {p90}"),
        ]
        label = f"{name} ({timing.decisions}): median {median}, p90 {p90}"
        rows.append(_bar_row(TOP + 24 + index * ROW, label, summary, segments))
    legend = [(BLUE, "median"), (SKY_BLUE, "90th percentile")]
    height = TOP + 24 + len(rows) * ROW
    description = (
        "Time from a question being asked to a decision, on a log scale: "
        "half the decisions came within the dark bar, nine in ten within the light one."
    )
    return _svg(
        chart_id,
        title,
        description,
        height + 22,
        [_legend(TOP - 6, legend), _time_axis(TOP + 24, height, end), _rows(rows)],
    )


def whole_percent(part: int, whole: int) -> int:
    """`part` of `whole` in whole percent, rounded to the nearest (half up: 2 of 3 is 67),
    but 100 only when all and 0 only when none (199 of 200 is 99, 1 of 200 is 1)."""
    rounded = (200 * part + whole) // (2 * whole)
    return rounded if part in (0, whole) else min(max(rounded, 1), 99)


def approval_rate_chart(
    approvers: Sequence[Approver], rule: RubberStampRule, chart_id: str = "approval-rate"
) -> str:
    """Per approver, the share of their votes that approve (blue) and reject (orange); an
    approver the rubber-stamp rule flags is outlined and marked in words."""
    title = "Approval rate per approver"
    voters = [approver for approver in approvers if approver.votes]
    if not voters:
        return _nothing(chart_id, title, "No approve or reject votes in this period.")
    rows = []
    for index, approver in enumerate(voters):
        rate = whole_percent(approver.approvals, approver.votes)
        votes = f"{approver.votes} vote{'s' if approver.votes != 1 else ''}"
        summary = f"{approver.name}: {rate}% of {votes} approve"
        mark = ""
        if approver.rubber_stamp:
            median = human_duration(timedelta(seconds=approver.vote_median or 0))
            summary += f"; flagged as a possible rubber stamp (median {median} to decide)"
            mark = "⚑ rubber stamp?"
        share = WIDTH / approver.votes
        segments = [
            Segment(
                approver.approvals * share,
                BLUE,
                "#fff",
                f"approved {approver.approvals}",
                str(approver.approvals),
            ),
            Segment(
                approver.rejections * share,
                ORANGE,
                "#000",
                f"rejected {approver.rejections}",
                str(approver.rejections),
            ),
        ]
        label = f"{approver.name}: {rate}% of {approver.votes} approve"
        rows.append(_bar_row(TOP + 24 + index * ROW, label, summary, segments, mark))
    legend = [(BLUE, "approved"), (ORANGE, "rejected")]
    description = (
        f"Flagged (outlined, marked ⚑): at least {rule.min_decisions} votes, at least "
        f"{_n(rule.approval_rate * 100)}% approving, median time to decide under "
        f"{_n(rule.median_seconds)} s."
    )
    height = TOP + 24 + len(rows) * ROW
    return _svg(chart_id, title, description, height, [_legend(TOP - 6, legend), _rows(rows)])
