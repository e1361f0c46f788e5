"""The bases the admin classes of workflows and approvals share."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist
from django.db.models import DateTimeField, Field, ForeignObjectRel, Model
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..datetimes import read_datetime
from ..engine.values import is_possible_id

# The lookups that compare a field's value itself (not its date, year or hour) with what
# the query string holds.
DATETIME_LOOKUPS = frozenset({"exact", "gt", "gte", "lt", "lte", "in", "range"})


def _field_and_lookup(model: type[Model], name: str) -> tuple[Field | ForeignObjectRel | None, str]:
    """The field a changelist parameter (`created_at__gte`, `invocation__created_at`)
    names and the lookup applied to it ("exact" when none); (None, "") when it names no
    field."""
    parts = name.split(LOOKUP_SEP)
    opts = model._meta
    for index, part in enumerate(parts):
        try:
            field = opts.get_field(part)
        except FieldDoesNotExist:
            return None, ""
        rest = parts[index + 1 :]
        if rest and field.is_relation and field.related_model is not None:
            opts = field.related_model._meta
            continue
        return field, LOOKUP_SEP.join(rest) or "exact"
    return None, ""


class GuardedAdmin(admin.ModelAdmin):
    """What a query string or a URL holds never fails a page: the database is not asked
    what it cannot answer."""

    class Media:
        css = {"all": ["workflows/lists.css"]}
        js = ["workflows/lists.js"]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        if not is_possible_id(object_id):  # PostgreSQL fails on a NUL even in a lookup
            return None
        return super().get_object(request, object_id, from_field)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        """Django's changelist; a query string it would fail on is an invalid lookup, which
        the list answers with its "?e=1" page: a NUL character (PostgreSQL refuses to
        compare it), a date the date hierarchy cannot bound (the year 9999 ends in
        the year 10000), a date and time PostgreSQL refuses."""
        if any("\x00" in text for item in request.GET.lists() for text in (item[0], *item[1])):
            raise IncorrectLookupParameters("a NUL character in the query string")
        self.read_datetime_lookups(request)
        try:
            return super().get_changelist_instance(request)
        except (ValueError, OverflowError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def read_datetime_lookups(self, request: HttpRequest) -> None:
        """Read each value the query string compares a date-time field with
        (`?created_at__gte=...`) as every door reads one (workflows.datetimes): one it
        refuses is an invalid lookup, and the list says why."""
        for name, values in request.GET.lists():
            field, lookup = _field_and_lookup(self.model, name)
            if not isinstance(field, DateTimeField) or lookup not in DATETIME_LOOKUPS:
                continue
            for value in values:
                for text in value.split(",") if lookup in ("in", "range") else [value]:
                    try:
                        read_datetime(text)
                    except ValueError as exc:
                        messages.error(request, f"{name}: {exc}")
                        raise IncorrectLookupParameters(exc) from None


class ReadOnlyAdmin(GuardedAdmin):
    """Viewing only: every state change goes through services."""

    def action_checkbox(self, obj: Model) -> SafeString:
        """Django's row checkbox, the same HTML without a widget template rendered per
        row (16 ms of a 50-row page, a third of its Python)."""
        label = format_html(_("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class MonitorAdmin(ReadOnlyAdmin):
    """A read-only record page of the monitor: its stylesheet, and what `page_context`
    adds to the record's page."""

    class Media:
        css = {"all": ["workflows/monitor.css"]}

    def page_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What the record's page shows beside its read-only fields."""
        return {}

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(self.page_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)
