"""Priorities, due dates and escalation ladders of a question (DESIGN 4.3): plain data,
validated when the question is asked."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .principals import parse_assignee

PRIORITIES = ("low", "normal", "high", "urgent")
DEFAULT_PRIORITY = "normal"


def check_priority(value: Any) -> str:
    if value not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, not {value!r}")
    return value


def check_delay(name: str, value: Any) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValueError(f"{name} must be a positive timedelta, not {value!r}")
    return value


@dataclass
class Escalation:
    """One step of a ladder: `after` the delay since the question was asked, remind the
    current assignees (`remind`) and/or replace them (`assignees`)."""

    after: timedelta
    remind: bool = False
    assignees: list[str] | None = field(default=None)

    def __post_init__(self) -> None:
        check_delay("escalation after", self.after)
        if not isinstance(self.remind, bool):
            raise ValueError(f"escalation remind must be True or False, not {self.remind!r}")
        if self.assignees is not None:
            if isinstance(self.assignees, str) or not isinstance(self.assignees, list | tuple):
                raise ValueError(
                    f"escalation assignees must be a list of strings, not {self.assignees!r}"
                )
            for assignee in self.assignees:
                parse_assignee(assignee)
            if not self.assignees:
                raise ValueError("escalation assignees must name someone (or be None)")
            self.assignees = list(dict.fromkeys(self.assignees))
        if not self.remind and self.assignees is None:
            raise ValueError("an escalation step must remind or name new assignees")

    def to_dict(self) -> dict[str, Any]:
        return {
            "after": self.after.total_seconds(),
            "remind": self.remind,
            "assignees": self.assignees,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Escalation:
        return cls(
            after=timedelta(seconds=data["after"]),
            remind=bool(data.get("remind")),
            assignees=data.get("assignees"),
        )


def check_ladder(steps: Any) -> list[Escalation]:
    """The steps as Escalations, in the order they apply; ValueError for anything else."""
    if isinstance(steps, Escalation) or not isinstance(steps, list | tuple):
        raise ValueError(f"escalation must be a list of Escalation steps, not {steps!r}")
    ladder = [s if isinstance(s, Escalation) else _not_a_step(s) for s in steps]
    for earlier, later in itertools.pairwise(ladder):
        if later.after < earlier.after:
            raise ValueError(
                f"escalation steps must be in order of `after`: {later.after} comes after "
                f"{earlier.after}"
            )
    return ladder


def _not_a_step(value: Any) -> Escalation:
    raise ValueError(f"an escalation step must be an Escalation, not {value!r}")
