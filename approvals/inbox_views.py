"""The inbox views as the admin shows them: one link per view, on the inbox's tabs, and
on the admin index with the number of questions in each, counted in one query
(workflows.inbox.inbox.counts). The tabs go without the numbers: the inbox's first page
stays one list query and one page count, whatever the table's size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.formats import number_format

from workflows.inbox import VIEWS, count_limit, counts

ALL = "all"


@dataclass(frozen=True)
class ViewLink:
    view: str  # "all" or one of VIEWS
    label: str
    url: str
    active: bool
    count: int | None = None  # None: not counted

    @property
    def count_text(self) -> str:
        """ "12", or "1,000+" past the counting limit."""
        if self.count is None:
            return ""
        if self.count > count_limit():
            return f"{number_format(count_limit(), force_grouping=True)}+"
        return number_format(self.count, force_grouping=True)


def view_links(user: Any, active: str | None = None, *, counted: bool) -> list[ViewLink]:
    """ "all" then each view, with its link into the inbox and, when `counted`, the number
    of questions in it (one query)."""
    numbers: dict[str, int | None] = dict(counts(user)) if counted else {}
    inbox = reverse("admin:approvals_pendingapproval_changelist")
    labels = {ALL: "all waiting for me", **VIEWS}
    return [
        ViewLink(
            view=view,
            label=label,
            count=numbers.get(view),
            url=inbox if view == ALL else f"{inbox}?view={view}",
            active=(active or ALL) == view,
        )
        for view, label in labels.items()
    ]


def view_tabs(request: HttpRequest) -> list[ViewLink]:
    view = request.GET.get("view")
    return view_links(request.user, view if view in VIEWS else None, counted=False)
