"""The audit trail, read-only: no one adds, changes or deletes an entry here (they are
appended by workflows.services). Entries can be downloaded as JSON lines."""

from __future__ import annotations

import io

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from ..audit.documents import export
from ..models import AuditEntry
from .base import ReadOnlyAdmin
from .display import json_block, short_id


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "created_at",
        "action",
        "actor_name",
        "for_whom",
        "invocation_short",
        "question",
    ]
    list_filter = ["action", "actor_name", "invocation__workflow_name", "created_at"]
    list_select_related = ["invocation", "on_behalf_of"]
    ordering = ["-id"]  # newest first; the chain's order is the id's
    search_fields = ["=interrupt_id", "=entry_hash", "actor_name"]
    date_hierarchy = "created_at"
    readonly_fields = (
        "created_at",
        "action",
        "actor",
        "actor_name",
        "on_behalf_of",
        "invocation",
        "interrupt_id",
        "data_json",
        "subject_hash",
        "prev_hash",
        "entry_hash",
    )
    fields = readonly_fields
    actions = ["download"]

    @admin.display(description="on behalf of", ordering="on_behalf_of__username")
    def for_whom(self, obj: AuditEntry) -> str:
        return obj.on_behalf_of.get_username() if obj.on_behalf_of else "-"

    @admin.display(description="invocation", ordering="invocation")
    def invocation_short(self, obj: AuditEntry) -> str:
        """The workflow and the invocation's shortened id, as the monitor's lists show it."""
        if obj.invocation is None:
            return "-"
        return f"{obj.invocation.workflow_name} {short_id(obj.invocation)}"

    @admin.display(description="question", ordering="interrupt_id")
    def question(self, obj: AuditEntry) -> str:
        """The question's id, shortened as the monitor's lists do (the full id is on the
        entry's page and in the search)."""
        if not obj.interrupt_id:
            return "-"
        return format_html('<span title="{}">{}</span>', obj.interrupt_id, obj.interrupt_id[:8])

    @admin.display(description="data")
    def data_json(self, obj: AuditEntry) -> str:
        return json_block(obj.data)

    @admin.action(description="Download the selected entries (JSON lines)", permissions=["view"])
    def download(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        out = io.StringIO()
        export(out, entries=queryset)
        response = HttpResponse(out.getvalue(), content_type="application/jsonl")
        response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
        return response
