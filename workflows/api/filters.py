"""django-filter filter sets of the API lists.

Each parameter is checked before it reaches a query: a malformed one, or an id past 64
bits (which SQLite refuses to bind), or a date and time with a UTC offset PostgreSQL
refuses, is a 400 naming the parameter."""

import datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from ..datetimes import read_datetime
from ..models import PRIORITY_CHOICES, Interrupt, Invocation
from ..people.inbox import VIEWS

ID_RANGE = {"min_value": -(2**63), "max_value": 2**63 - 1}


@extend_schema_field(
    {"type": "integer", "minimum": ID_RANGE["min_value"], "maximum": ID_RANGE["max_value"]}
)
class UserIdFilter(filters.NumberFilter):
    """A user's id: an integer a 64-bit id column holds ("1e20" or "1.5" is not one)."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**ID_RANGE, **kwargs})


class DateTimeInputField(IsoDateTimeField):
    """An ISO 8601 date and time, read as every door reads one (workflows.datetimes): in
    UTC, and a 400 naming the parameter for an offset past ±15:59, which PostgreSQL
    refuses."""

    def to_python(self, value: Any) -> datetime.datetime | None:
        if value in self.empty_values:
            return None
        try:
            return read_datetime(str(value))
        except ValueError as exc:
            # As a parameter: django-filter %-formats the message, and the text may hold a %.
            raise ValidationError("%(problem)s", code="invalid", params={"problem": exc}) from None


class CreatedFilter(filters.IsoDateTimeFilter):
    """`created_after` / `created_before`: an ISO 8601 date and time, inclusive."""

    field_class = DateTimeInputField

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
