"""django-filter filter sets of the API lists.

Each parameter is checked before it reaches a query: a malformed one, or a date and time
with a UTC offset PostgreSQL refuses, or a boolean that is not one, is a 400 naming the
parameter. A person is named by user id or by username, whichever the client holds."""

import datetime
import re
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from ..datetimes import read_datetime
from ..expressions import HasAnyElement
from ..inbox import VIEWS
from ..models import PRIORITY_CHOICES, Delegation, Interrupt, Invocation
from ..principals import active_delegations

_USER_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits a 64-bit id column holds
USERNAME_MAX_LENGTH = 150  # django.contrib.auth's


@extend_schema_field({"type": "string", "maxLength": USERNAME_MAX_LENGTH})
class PersonFilter(filters.CharFilter):
    """A person by user id or by username: digits match either (a username may be all
    digits); anything else is a username. `field_name` is the foreign key to the user."""

    def __init__(self, field_name: str, **kwargs: Any) -> None:
        super().__init__(
            field_name=field_name,
            max_length=USERNAME_MAX_LENGTH,
            label="User id or username",
            **kwargs,
        )

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if not value:
            return qs
        username = f"{self.field_name}__{get_user_model().USERNAME_FIELD}"
        match = Q(**{username: value})
        if _USER_ID.fullmatch(value):
            match |= Q(**{f"{self.field_name}_id": int(value)})
        return qs.filter(match)


class StrictBooleanField(forms.Field):
    """`true` or `false` (also `1`/`0`, `yes`/`no`, any case); anything else is refused,
    not read as no filter."""

    default_error_messages = {"invalid": "%(value)s is not a boolean: true or false"}
    VALUES = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def to_python(self, value: Any) -> bool | None:
        if value in self.empty_values:
            return None
        read = self.VALUES.get(str(value).lower())
        if read is None:
            raise ValidationError(
                self.error_messages["invalid"], code="invalid", params={"value": value}
            )
        return read


@extend_schema_field({"type": "boolean"})
class StrictBooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The text as given: django-filter's BooleanWidget reads "maybe" as no value.
        super().__init__(*args, **{"widget": forms.TextInput, **kwargs})


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
    started_by = PersonFilter("started_by")
    created_after = CreatedFilter("gte", "Created at or after")
    created_before = CreatedFilter("lte", "Created at or before")

    class Meta:
        model = Invocation
        fields = ["status", "workflow", "started_by", "created_after", "created_before"]


class InboxViewFilter(filters.ChoiceFilter):
    """`view`: one of the inbox views (DESIGN 4.3). Documented and checked here; applied by
    the view's queryset (workflows.inbox.inbox.waiting_for), as "delegated" reaches
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
    claimed_by = PersonFilter("claimed_by")
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


class DelegationFilter(filters.FilterSet):
    delegator = PersonFilter("delegator")
    delegate = PersonFilter("delegate")
    active = StrictBooleanFilter(method="filter_active", label="In force now")
    workflow = filters.CharFilter(
        method="filter_workflow", label="Covers this workflow (named, or every workflow)"
    )

    class Meta:
        model = Delegation
        fields = ["delegator", "delegate", "active", "workflow"]

    def filter_active(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        in_force = active_delegations()
        return queryset.filter(in_force if value else ~in_force)

    def filter_workflow(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(workflows=[]) | HasAnyElement("workflows", [value]))
