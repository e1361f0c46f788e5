"""Invocation monitor: invocations with their node runs, interrupts and event timeline.

Everything is read-only here; the cancel and retry actions go through services.
"""

from typing import Any

from django.contrib import admin, messages
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest

from . import services
from .engine.errors import WorkflowError
from .engine.status import InterruptStatus
from .models import Interrupt, Invocation, NodeRun, SessionEvent


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class NodeRunInline(ReadOnlyInline):
    model = NodeRun
    fields = ["path", "status", "run_id", "attempt", "route", "output", "interrupt_ids", "error"]
    ordering = ["id"]


class InterruptInline(ReadOnlyInline):
    model = Interrupt
    fields = ["id", "path", "message", "status", "response", "resolved_by", "resolved_at"]


class SessionEventInline(ReadOnlyInline):
    model = SessionEvent
    verbose_name_plural = "event timeline"
    fields = ["id", "author", "path", "status", "output", "long_running_tool_ids", "error"]
    ordering = ["id"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewing only: every state change goes through services."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> Any:
        extra_context = {**(extra_context or {}), "show_save": False}
        extra_context.update(show_save_and_continue=False, show_save_and_add_another=False)
        return super().changeform_view(request, object_id, form_url, extra_context)


def _apply(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, verb: str
) -> None:
    operation = getattr(services, verb)
    done, refused = 0, []
    for invocation in queryset:
        try:
            operation(invocation, actor=request.user)
            done += 1
        except WorkflowError as exc:
            refused.append(str(exc))
    if done:
        modeladmin.message_user(request, f"{verb.title()}: {done} invocation(s).", messages.SUCCESS)
    for reason in refused:
        modeladmin.message_user(request, reason, messages.WARNING)


@admin.register(Invocation)
class InvocationAdmin(ReadOnlyAdmin):
    list_display = ["short_id", "workflow_name", "status", "open_questions", "updated_at"]
    list_filter = ["status", "workflow_name"]
    search_fields = ["id", "workflow_name"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in Invocation._meta.fields]
    inlines = [NodeRunInline, InterruptInline, SessionEventInline]
    actions = ["cancel_invocations", "retry_invocations"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        pending = Interrupt.objects.filter(status=InterruptStatus.PENDING).only(
            "id", "invocation_id", "message"
        )
        return (
            super()
            .get_queryset(request)
            .prefetch_related(
                Prefetch("interrupts", queryset=pending, to_attr="pending_interrupts")
            )
        )

    @admin.display(description="id", ordering="id")
    def short_id(self, obj: Invocation) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="waiting for")
    def open_questions(self, obj: Invocation) -> str:
        return "; ".join(i.message or i.id for i in obj.pending_interrupts) or "-"

    @admin.action(description="Cancel selected invocations")
    def cancel_invocations(self, request: HttpRequest, queryset: QuerySet) -> None:
        _apply(self, request, queryset, "cancel")

    @admin.action(description="Retry selected failed invocations")
    def retry_invocations(self, request: HttpRequest, queryset: QuerySet) -> None:
        _apply(self, request, queryset, "retry")

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Viewing is enough for the monitor, but actions need the change permission.
        return request.user.has_perm("workflows.change_invocation")


@admin.register(Interrupt)
class InterruptAdmin(ReadOnlyAdmin):
    list_display = ["id", "workflow_name", "message", "status", "deadline", "created_at"]
    list_filter = ["status", "workflow_name"]
    search_fields = ["id", "message"]
    readonly_fields = [f.name for f in Interrupt._meta.fields]
