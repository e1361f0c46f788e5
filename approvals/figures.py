"""The numbers behind the approvals dashboard, in two queries whatever the data: the open
questions grouped by workflow, age, priority and lateness, and the period's decisions.

Percentiles are computed here in Python over the period's decisions, not with PostgreSQL's
PERCENTILE_CONT: what counts as an approval is `approval_vote` (one definition, in the
engine; a SQL copy would drift from it), SQLite has no percentile function (one code path,
tested on both databases), and the rows are bounded (a period of at most 90 days, at most
HITL["DASHBOARD_MAX_DECISIONS"] of them, the latest first). `percentile` interpolates
between the closest ranks as PERCENTILE_CONT does, so both would give the same figures. Each
row carries only what the figures need (the answer's two keys a vote is read from, and the
time taken computed by the database), so 50,000 of them take a fraction of a second.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.db.models import (
    BooleanField,
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Value,
    When,
)
from django.utils import timezone

from workflows.conf import hitl_settings
from workflows.engine.escalation import PRIORITIES
from workflows.engine.events import approval_vote
from workflows.engine.status import InterruptStatus
from workflows.models import Decision, Interrupt

PERIODS = (7, 30, 90)  # days the dashboard looks back over
DEFAULT_PERIOD = 30
# How long the open questions have waited: (label, upper bound); the last has none.
AGE_BUCKETS: tuple[tuple[str, timedelta | None], ...] = (
    ("under 1 hour", timedelta(hours=1)),
    ("1 to 24 hours", timedelta(days=1)),
    ("1 to 7 days", timedelta(days=7)),
    ("over 7 days", None),
)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile of `values` (not empty), interpolated linearly between
    the closest ranks: PERCENTILE_CONT's definition (the median is fraction 0.5)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@dataclass(frozen=True)
class Timing:
    """Seconds from a question being asked to a decision on it."""

    decisions: int
    median: float
    p90: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        return cls(len(seconds), percentile(seconds, 0.5), percentile(seconds, 0.9))


@dataclass(frozen=True)
class WorkflowLoad:
    workflow: str
    open: int
    overdue: int  # pending and past its due date


@dataclass(frozen=True)
class Approver:
    name: str
    timing: Timing  # over all their decisions in the period
    approvals: int  # votes that approve (an approval gate's edit included)
    rejections: int
    vote_median: float | None  # median seconds over the votes alone (None: no votes)
    rubber_stamp: bool

    @property
    def votes(self) -> int:
        return self.approvals + self.rejections

    @property
    def approval_rate(self) -> float | None:
        return self.approvals / self.votes if self.votes else None


@dataclass(frozen=True)
class RubberStampRule:
    """HITL's thresholds: flagged when all three hold."""

    min_decisions: int
    approval_rate: float
    median_seconds: float

    @classmethod
    def from_settings(cls) -> RubberStampRule:
        return cls(
            hitl_settings.RUBBER_STAMP_MIN_DECISIONS,
            hitl_settings.RUBBER_STAMP_APPROVAL_RATE,
            hitl_settings.RUBBER_STAMP_MEDIAN_SECONDS,
        )

    def applies(self, approvals: int, rejections: int, vote_median: float | None) -> bool:
        votes = approvals + rejections
        return (
            vote_median is not None  # so there are votes
            and votes >= self.min_decisions
            and approvals / votes >= self.approval_rate
            and vote_median < self.median_seconds
        )


@dataclass(frozen=True)
class DashboardFigures:
    now: datetime
    days: int
    workflow: str  # "" for all
    # {age bucket label: {priority: open questions}}, every bucket and priority present.
    open_by_age: dict[str, dict[str, int]]
    load: list[WorkflowLoad]  # workflows with open questions, by name
    per_workflow: dict[str, Timing]  # workflows with decisions in the period, by name
    approvers: list[Approver]  # by name
    rule: RubberStampRule
    decisions: int  # decisions read
    capped: bool  # the period had more decisions than were read


def dashboard_figures(
    *, days: int = DEFAULT_PERIOD, workflow: str = "", now: datetime | None = None
) -> DashboardFigures:
    """The dashboard's numbers for the last `days` days (the open questions: as they are
    now), of one workflow or of all of them."""
    now = now or timezone.now()
    open_by_age, load = _open_questions(now, workflow)
    limit = hitl_settings.DASHBOARD_MAX_DECISIONS
    read = _decisions(now - timedelta(days=days), now, workflow)
    rows, capped = read[:limit], len(read) > limit
    rule = RubberStampRule.from_settings()
    return DashboardFigures(
        now=now,
        days=days,
        workflow=workflow,
        open_by_age=open_by_age,
        load=load,
        per_workflow=_per_workflow(rows),
        approvers=_approvers(rows, rule),
        rule=rule,
        decisions=len(rows),
        capped=capped,
    )


def _open_questions(
    now: datetime, workflow: str
) -> tuple[dict[str, dict[str, int]], list[WorkflowLoad]]:
    """One grouped query: pending questions by workflow, age bucket, priority, lateness."""
    pending = Interrupt.objects.filter(status=InterruptStatus.PENDING)
    if workflow:
        pending = pending.filter(workflow_name=workflow)
    age = Case(
        *(
            When(created_at__gt=now - bound, then=Value(index))
            for index, (_, bound) in enumerate(AGE_BUCKETS)
            if bound is not None
        ),
        default=Value(len(AGE_BUCKETS) - 1),
        output_field=IntegerField(),
    )
    late = Case(
        When(due_at__lt=now, then=Value(True)), default=Value(False), output_field=BooleanField()
    )
    groups = (
        pending.annotate(age=age, late=late)
        .values("workflow_name", "age", "priority", "late")
        .annotate(n=Count("pk"))
        .order_by()
    )
    by_age = {label: dict.fromkeys(PRIORITIES, 0) for label, _ in AGE_BUCKETS}
    opened: dict[str, int] = defaultdict(int)
    overdue: dict[str, int] = defaultdict(int)
    for group in groups:
        label = AGE_BUCKETS[group["age"]][0]
        by_age[label][group["priority"]] = by_age[label].get(group["priority"], 0) + group["n"]
        opened[group["workflow_name"]] += group["n"]
        overdue[group["workflow_name"]] += group["n"] if group["late"] else 0
    load = [WorkflowLoad(name, opened[name], overdue[name]) for name in sorted(opened)]
    return by_age, load


class Decided(NamedTuple):
    approver: str
    workflow: str
    vote: bool | None  # approval_vote of the answer
    seconds: float  # from the question being asked to this decision


def _decisions(since: datetime, now: datetime, workflow: str) -> list[Decided]:
    """The period's decisions, the latest first, at most DASHBOARD_MAX_DECISIONS and one
    more (which says the period had more)."""
    decided = Decision.objects.filter(created_at__gte=since, created_at__lte=now)
    if workflow:
        decided = decided.filter(interrupt__workflow_name=workflow)
    # The two keys approval_vote reads, not the whole answer, and the time taken as one
    # duration: decoding the JSON and two timestamps per row was most of the page's time.
    taken = ExpressionWrapper(F("created_at") - F("interrupt__created_at"), DurationField())
    rows = (
        decided.order_by("-created_at", "-pk")
        .annotate(taken=taken)
        .values_list(
            f"actor__{get_user_model().USERNAME_FIELD}",
            "interrupt__workflow_name",
            "response__approved",
            "response__decision",
            "taken",
        )
    )
    return [
        Decided(
            approver,
            name,
            approval_vote({"approved": approved, "decision": decision}),
            max(0.0, taken.total_seconds()),
        )
        for approver, name, approved, decision, taken in rows[
            : hitl_settings.DASHBOARD_MAX_DECISIONS + 1
        ]
    ]


def _per_workflow(rows: list[Decided]) -> dict[str, Timing]:
    times: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        times[row.workflow].append(row.seconds)
    return {name: Timing.of(times[name]) for name in sorted(times)}


def _approvers(rows: list[Decided], rule: RubberStampRule) -> list[Approver]:
    times: dict[str, list[float]] = defaultdict(list)
    votes: dict[str, dict[bool, list[float]]] = defaultdict(lambda: {True: [], False: []})
    for row in rows:
        times[row.approver].append(row.seconds)
        if row.vote is not None:
            votes[row.approver][row.vote].append(row.seconds)
    approvers = []
    for name in sorted(times):
        approved, rejected = votes[name][True], votes[name][False]
        voted = approved + rejected
        vote_median = percentile(voted, 0.5) if voted else None
        approvers.append(
            Approver(
                name=name,
                timing=Timing.of(times[name]),
                approvals=len(approved),
                rejections=len(rejected),
                vote_median=vote_median,
                rubber_stamp=rule.applies(len(approved), len(rejected), vote_median),
            )
        )
    return approvers
