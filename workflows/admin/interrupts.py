"""The read-only record of each interrupt: what was asked of whom and how it ended."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from ..inbox import ladder_summary
from ..models import Interrupt
from .base import MonitorAdmin
from .display import answer_url, json_block, question_cell, rewind_url, short_id
from .notifications import NotificationAttemptInline


@admin.register(Interrupt)
class InterruptAdmin(MonitorAdmin):
    list_display = ["question", "status", "deadline", "created_at"]
    list_filter = ["status", "workflow_name"]
    search_fields = ["id", "message"]
    # What was asked of whom and how it ended first; the engine's bookkeeping folded.
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "message",
                    "status",
                    "invocation",
                    "for_whom",
                    "quorum",
                    "four_eyes",
                    "require_signature",
                    "claimed_by",
                    "priority",
                    "due_at",
                    "deadline",
                    "when_overdue",
                    "escalation_ladder",
                    "created_at",
                ]
            },
        ),
        (
            "Question and answer",
            {
                "fields": [
                    "payload_json",
                    "response_schema_json",
                    "response_json",
                    "resolved_by",
                    "resolved_at",
                ]
            },
        ),
        (
            "Internals",
            {
                "classes": ["collapse"],
                "fields": [
                    "id",
                    "workflow_name",
                    "path",
                    "run_id",
                    "claimed_at",
                    "timeout_seconds",
                    "consumed",
                    "deferred",
                ],
            },
        ),
    ]
    readonly_fields = [
        *(f.name for f in Interrupt._meta.fields),
        "for_whom",
        "when_overdue",
        "escalation_ladder",
        "payload_json",
        "response_schema_json",
        "response_json",
    ]
    change_form_template = "admin/workflows/interrupt/change_form.html"
    inlines = [NotificationAttemptInline]  # who was told, when, and what failed

    @admin.display(description="question", ordering="message")
    def question(self, obj: Interrupt) -> str:
        return question_cell(obj, obj.workflow_name, short_id(obj))

    @admin.display(description="for whom")
    def for_whom(self, obj: Interrupt) -> str:
        return ", ".join(obj.assignees) or "anyone who may answer"

    @admin.display(description="when overdue")
    def when_overdue(self, obj: Interrupt) -> str:
        if obj.on_timeout is None:
            return "the invocation fails"
        return format_html("answered with {}", json_block(obj.on_timeout.get("response")))

    @admin.display(description="escalation")
    def escalation_ladder(self, obj: Interrupt) -> str:
        return ladder_summary(obj) or "none"

    @admin.display(description="payload")
    def payload_json(self, obj: Interrupt) -> str:
        return json_block(obj.payload)

    @admin.display(description="response schema")
    def response_schema_json(self, obj: Interrupt) -> str:
        return json_block(obj.response_schema)

    @admin.display(description="answer")
    def response_json(self, obj: Interrupt) -> str:
        return "-" if obj.response is None else json_block(obj.response)

    def page_context(self, request: HttpRequest, obj: Interrupt) -> dict[str, Any]:
        # The record is read-only; a pending question someone may answer links to where
        # they answer it (unless that is this very page: no approvals inbox).
        url = answer_url(obj, request.user)
        return {
            "answer_url": url if url != request.path else None,
            "rewind_url": rewind_url(obj, request.user),
        }
