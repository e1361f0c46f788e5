"""django-filter filter sets of the API lists.

Each parameter is checked before it reaches a query: a malformed one, or an id past 64
bits (which SQLite refuses to bind), is a 400 naming the parameter; a date and time is
brought within what the database can compare."""

import datetime
from typing import Any

from django import forms
from django.utils import timezone
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from ..models import PRIORITY_CHOICES, Interrupt, Invocation
from ..people.inbox import VIEWS

ID_RANGE = {"min_value": -(2**63), "max_value": 2**63 - 1}
EARLIEST = datetime.datetime.min.replace(tzinfo=datetime.UTC)
LATEST = datetime.datetime.max.replace(tzinfo=datetime.UTC)


@extend_schema_field(
    {"type": "integer", "minimum": ID_RANGE["min_value"], "maximum": ID_RANGE["max_value"]}
)
class UserIdFilter(filters.NumberFilter):
    """A user's id: an integer a 64-bit id column holds ("1e20" or "1.5" is not one)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**ID_RANGE, **kwargs})


class StorableDateTimeField(IsoDateTimeField):
    """An ISO 8601 date and time. One whose UTC equivalent falls outside the years 1 to
    9999 ("0001-01-01T00:00+14:00" is in the year 0 in UTC), which no database can
    compare, stands for the earliest or latest instant one can: no row is earlier or
    later, so the list is the same."""

    def to_python(self, value: Any) -> datetime.datetime | None:
        result = super().to_python(value)
        if result is not None and timezone.is_aware(result):
            try:
                result.astimezone(datetime.UTC)
            except OverflowError:
                return EARLIEST if result.year == 1 else LATEST
        return result


class CreatedFilter(filters.IsoDateTimeFilter):
    """`created_after` / `created_before`: an ISO 8601 date and time, inclusive."""

    field_class = StorableDateTimeField

    def __init__(self, lookup_expr: str, label: str) -> None:
        super().__init__(field_name="created_at", lookup_expr=lookup_expr, label=label)


class InvocationFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name")
    started_by = UserIdFilter(field_name="started_by_id")
    created_after = CreatedFilter("gte", "Created at or after")
    created_before = CreatedFilter("lte", "Created at or before")

    class Meta:
        model = Invocation
        fields = ["status", "workflow", "started_by", "created_after", "created_before"]


class InboxViewFilter(filters.ChoiceFilter):
    """`view`: one of the inbox views (DESIGN 4.3). Documented and checked here; applied by
    the view's queryset (workflows.people.inbox.waiting_for), as "delegated" reaches
    questions the answer rule alone does not give."""

    def filter(self, qs: Any, value: Any) -> Any:
        return qs


class InterruptFilter(filters.FilterSet):
    view = InboxViewFilter(
        choices=list(VIEWS.items()),
        label="Inbox view: pending questions waiting for you, " + ", ".join(VIEWS),
    )
    priority = filters.ChoiceFilter(
        choices=PRIORITY_CHOICES,
        error_messages={
            "invalid_choice": "%(value)s is not a priority: one of "
            + ", ".join(value for value, _ in PRIORITY_CHOICES)
        },
    )
    workflow = filters.CharFilter(field_name="workflow_name")
    invocation = filters.UUIDFilter(field_name="invocation_id")
    claimed_by = UserIdFilter(field_name="claimed_by_id")
    created_after = CreatedFilter("gte", "Created at or after")
    created_before = CreatedFilter("lte", "Created at or before")

    class Meta:
        model = Interrupt
        fields = [
            "view",
            "status",
            "priority",
            "workflow",
            "invocation",
            "claimed_by",
            "created_after",
            "created_before",
        ]
