"""The audit trail, read-only: no one adds, changes or deletes an entry here (they are
appended by workflows.services). Entries can be downloaded as JSON lines."""

from __future__ import annotations

import io

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ..audit.documents import export
from ..models import AuditEntry
from .base import ReadOnlyAdmin
from .display import json_block


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "action", "actor_name", "invocation", "interrupt_id"]
    list_filter = ["action", "actor_name", "invocation__workflow_name", "created_at"]
    list_select_related = ["invocation"]
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
