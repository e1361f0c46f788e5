"""The inbox's read side (DESIGN 4.3): the questions waiting for a person in views
(`views`), in one order (`order`), searched (`search`), and the escalation ladder as people
read it (`ladder`). It changes nothing; callers import from `workflows.inbox`."""

from .ladder import Handover, asked_at, handovers, ladder_summary, step_action, step_due_at
from .order import INBOX_ORDER
from .search import search
from .views import (
    VIEWS,
    CappedPaginator,
    UnknownViewError,
    count_each,
    count_limit,
    counts,
    waiting_for,
)

__all__ = [
    "INBOX_ORDER",
    "VIEWS",
    "CappedPaginator",
    "Handover",
    "UnknownViewError",
    "asked_at",
    "count_each",
    "count_limit",
    "counts",
    "handovers",
    "ladder_summary",
    "search",
    "step_action",
    "step_due_at",
    "waiting_for",
]
