"""Who a question names: "user:<username>" and "group:<name>" strings (DESIGN 4.1)."""

from __future__ import annotations

from typing import Any

ASSIGNEE_KINDS = ("user", "group")


def parse_assignee(value: Any) -> tuple[str, str]:
    """Split "user:<username>" or "group:<name>" into (kind, name); ValueError otherwise."""
    kind, sep, name = value.partition(":") if isinstance(value, str) else ("", "", "")
    if not sep or kind not in ASSIGNEE_KINDS or not name.strip():
        raise ValueError(f'assignee {value!r} is not "user:<username>" or "group:<name>"')
    return kind, name
