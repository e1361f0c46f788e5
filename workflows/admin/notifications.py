"""Notification attempts: a read-only log of every call of a notifier (HITL["NOTIFIERS"]),
listed here and on each interrupt's page."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from ..models import NotificationAttempt
from .base import ReadOnlyAdmin
from .display import question_cell, short_id

ATTEMPT_FIELDS = ["created_at", "event", "notifier", "attempt", "succeeded", "error"]


class NotificationAttemptInline(admin.TabularInline):
    model = NotificationAttempt
    fields = readonly_fields = tuple(ATTEMPT_FIELDS)
    extra = 0
    can_delete = False
    ordering = ["created_at", "pk"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(NotificationAttempt)
class NotificationAttemptAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "question", "event", "notifier", "attempt", "succeeded"]
    list_filter = ["succeeded", "event", "notifier"]
    list_select_related = ["interrupt"]
    search_fields = ["interrupt__id", "error"]
    readonly_fields = ["interrupt", *ATTEMPT_FIELDS]
    date_hierarchy = "created_at"

    @admin.display(description="question", ordering="interrupt")
    def question(self, obj: NotificationAttempt) -> str:
        return question_cell(obj.interrupt, obj.interrupt.workflow_name, short_id(obj.interrupt))
