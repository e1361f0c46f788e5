"""The inbox (DESIGN 4.3): the questions waiting for a person's decision, in views, in one
order, and counted at a cost that does not grow with the table.

- `waiting_for(user, view=None)`: pending questions `user` may answer (the answer policy's
  queryset half) and has not decided on yet, narrowed to one of `VIEWS`; "delegated" asks
  the policy's `answerable_by_delegation` instead.
- `INBOX_ORDER` (`order`) and `search(queryset, text)` (`search`) order and narrow them.
- `counts(user)`: the number in each view and in all, in one query, each stopped at
  `HITL["INBOX_COUNT_LIMIT"]` rows; `CappedPaginator` pages a list counted the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import cached_property
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.core.paginator import Page, Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.formats import number_format

from ..conf import hitl_settings
from ..engine.status import InterruptStatus
from ..expressions import HasAnyElement
from ..models import Interrupt
from ..policy import answer_policy
from ..principals import assignee_names
from . import statements
from .order import INBOX_ORDER

VIEWS: dict[str, str] = {
    "mine": "assigned to me",
    "groups": "to my groups",
    "claimed": "claimed by me",
    "delegated": "delegated to me",
    "overdue": "overdue",
    "due_soon": "due soon",
}
DELEGATED = "delegated"


class UnknownViewError(ValueError):
    def __init__(self, view: str) -> None:
        super().__init__(f"unknown view {view!r}: one of {', '.join(VIEWS)}")
        self.view = view


def _mine(user: Any) -> HasAnyElement:
    return HasAnyElement("assignees", [f"user:{user.get_username()}"])


def _groups(user: Any) -> HasAnyElement:
    groups = [name for name in assignee_names(user) if name.startswith("group:")]
    return HasAnyElement("assignees", groups)  # none: matches nothing


def _claimed(user: Any) -> Q:
    return Q(claimed_by=user.pk)


def _overdue(user: Any) -> Q:
    return Q(due_at__lt=timezone.now())


def _due_soon(user: Any) -> Q:
    now = timezone.now()
    return Q(due_at__gte=now, due_at__lt=now + timedelta(seconds=hitl_settings.DUE_SOON_SECONDS))


CONDITIONS: dict[str, Callable[[Any], Q | HasAnyElement]] = {
    "mine": _mine,
    "groups": _groups,
    "claimed": _claimed,
    "overdue": _overdue,
    "due_soon": _due_soon,
}


def check_view(view: str) -> str:
    if view not in VIEWS:
        raise UnknownViewError(view)
    return view


def waiting_for(
    user: Any, view: str | None = None, queryset: QuerySet[Any] | None = None
) -> QuerySet[Any]:
    """The pending questions of `queryset` (all interrupts by default) that `user` may
    answer and has not decided on, in `view` (None: all of them), in the inbox's order."""
    base = Interrupt.objects.all() if queryset is None else queryset
    base = base.filter(status=InterruptStatus.PENDING).exclude(decisions__actor=user.pk)
    if view is None:
        chosen = answer_policy().answerable(user, base)
    elif check_view(view) == DELEGATED:
        chosen = answer_policy().answerable_by_delegation(user, base)
    else:
        chosen = answer_policy().answerable(user, base).filter(CONDITIONS[view](user))
    return chosen.order_by(*INBOX_ORDER)


def count_limit() -> int:
    return int(hitl_settings.INBOX_COUNT_LIMIT)


def counts(user: Any) -> dict[str, int]:
    """How many questions wait for `user` ("all") and in each view, in one query. A count
    above `count_limit()` comes back as `count_limit() + 1` (shown as "1,000+")."""
    querysets = {"all": waiting_for(user), **{view: waiting_for(user, view) for view in VIEWS}}
    return count_each(querysets, count_limit() + 1)


def count_each(querysets: Mapping[str, QuerySet[Any]], limit: int) -> dict[str, int]:
    """The number of rows of each queryset, up to `limit`, in one round trip (on the
    database of the first)."""
    using = next(iter(querysets.values())).db
    columns, params = [], []
    for queryset in querysets.values():
        capped = queryset.order_by().values("pk")[:limit]
        try:
            sql, query_params = capped.query.get_compiler(using=using).as_sql()
        except EmptyResultSet:  # e.g. `.none()`: Django would not run it, nothing to count
            columns.append("0")
            continue
        columns.append(statements.COUNT_OF.format(query=sql))
        params.extend(query_params)
    with connections[using].cursor() as cursor:
        cursor.execute(statements.COUNTS.format(columns=", ".join(columns)), params)
        row = cursor.fetchone()
    return dict(zip(querysets, map(int, row), strict=True))


class CappedPaginator(Paginator):
    """A paginator that counts at most `count_limit()` + 1 rows: on a table of a million
    pending questions the first page costs what it costs on a thousand. Past the limit
    (`capped`), the pages go as far as the limit; filters and the search reach the rest."""

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if isinstance(object_list, QuerySet):
            return object_list.order_by()[: count_limit() + 1].count()
        return len(object_list)

    def page(self, number: Any) -> Page:
        """Page `number`, whole even past a capped count (Django's would stop at it)."""
        if not self.capped:
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return Page(self.object_list[bottom : bottom + self.per_page], number, self)

    @property
    def capped(self) -> bool:
        return self.count > count_limit()

    @property
    def limit_text(self) -> str:
        return number_format(count_limit(), force_grouping=True)
