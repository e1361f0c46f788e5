"""The bases the admin classes of workflows and approvals share."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewing only: every state change goes through services."""

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
