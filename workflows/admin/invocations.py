"""The invocation monitor's admin: the list, each invocation's page, the registered
workflows' pages, and cancel (with a confirmation page) and retry as actions and as
buttons on the invocation's page. Who may cancel or retry is the services' one rule,
`user.has_perm("workflows.cancel_invocation", invocation)` (`retry_invocation`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from .. import services
from ..engine.errors import WorkflowError
from ..engine.status import InterruptStatus
from ..models import OPEN_STATUSES, Interrupt, Invocation
from ..policy import CANCEL_PERMISSION, RETRY_PERMISSION
from ..registry import UnknownWorkflowError
from . import monitor
from .base import MonitorAdmin
from .display import json_block, short_id


@admin.register(Invocation)
class InvocationAdmin(MonitorAdmin):
    list_display = ["short_id", "workflow_link", "status", "open_questions", "updated_at"]
    list_filter = ["status", "workflow_name"]
    search_fields = ["id", "workflow_name"]
    date_hierarchy = "created_at"
    change_form_template = "admin/workflows/invocation/change_form.html"
    change_list_template = "admin/workflows/invocation/change_list.html"
    fieldsets = [
        (None, {"fields": ["workflow_name", "status", "started_by", "created_at", "finished_at"]}),
        ("Input and outcome", {"fields": ["input_json", "output_json", "error_text"]}),
        (
            "Internals",
            {
                "classes": ["collapse"],
                "fields": [
                    "id",
                    "session",
                    "workflow_version",
                    "updated_at",
                    "lease_owner",
                    "lease_expires_at",
                    "unfinished_deliveries",
                ],
            },
        ),
    ]
    readonly_fields = [
        *(f.name for f in Invocation._meta.fields),
        "input_json",
        "output_json",
        "error_text",
    ]
    actions = ["cancel_invocations", "retry_invocations"]

    @admin.display(description="id", ordering="id")
    def short_id(self, obj: Invocation) -> str:
        return short_id(obj)

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

    # --- columns and fields

    @admin.display(description="workflow", ordering="workflow_name")
    def workflow_link(self, obj: Invocation) -> str:
        url = reverse("admin:workflows_definition", args=[obj.workflow_name])
        return format_html('<a href="{}">{}</a>', url, obj.workflow_name)

    @admin.display(description="waiting for")
    def open_questions(self, obj: Invocation) -> str:
        questions = "; ".join(i.message or i.id for i in obj.pending_interrupts)
        if not questions:
            return "-"
        # Three lines at most in the list (lists.css); the whole text in its title.
        return format_html('<span class="hitl-clamp" title="{}">{}</span>', questions, questions)

    @admin.display(description="input")
    def input_json(self, obj: Invocation) -> str:
        return json_block(obj.input)

    @admin.display(description="output")
    def output_json(self, obj: Invocation) -> str:
        if obj.output is None and obj.status in OPEN_STATUSES:
            return "- (not finished yet)"
        return json_block(obj.output)

    @admin.display(description="error")
    def error_text(self, obj: Invocation) -> str:
        return format_html('<pre class="hitl-traceback">{}</pre>', obj.error) if obj.error else "-"

    # --- permissions of the actions: for one invocation, the rule (which lets its starter
    # in); for the bulk actions, the model permission (the services ask the rule for each)

    def has_cancel_permission(self, request: HttpRequest, obj: Invocation | None = None) -> bool:
        return request.user.has_perm(CANCEL_PERMISSION, obj)

    def has_retry_permission(self, request: HttpRequest, obj: Invocation | None = None) -> bool:
        return request.user.has_perm(RETRY_PERMISSION, obj)

    # --- pages

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("workflows/", view(self.definitions_view), name="workflows_definitions"),
            path("workflows/<str:name>/", view(self.definition_view), name="workflows_definition"),
            path(
                "<path:object_id>/cancel/",
                view(self.cancel_view),
                name="workflows_invocation_cancel",
            ),
            path(
                "<path:object_id>/retry/",
                view(self.retry_view),
                name="workflows_invocation_retry",
            ),
            *super().get_urls(),
        ]

    def page_context(self, request: HttpRequest, obj: Invocation) -> dict[str, Any]:
        page = monitor.invocation_page(
            obj,
            request.user,
            may_cancel=self.has_cancel_permission(request, obj),
            may_retry=self.has_retry_permission(request, obj),
        )
        return {**page, "stream_url": monitor.stream_url(obj)}

    def definitions_view(self, request: HttpRequest) -> TemplateResponse:
        """Every registered workflow with its graph and how many invocations it has."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return self._render_definitions(
            request, "Registered workflows", monitor.registered_workflows()
        )

    def definition_view(self, request: HttpRequest, name: str) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            entry = monitor.registered_workflow(name)
        except UnknownWorkflowError as exc:
            raise Http404(str(exc)) from None
        return self._render_definitions(request, f"Workflow {name}", [entry])

    def _render_definitions(
        self, request: HttpRequest, title: str, definitions: list
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "definitions": definitions,
        }
        return TemplateResponse(request, "admin/workflows/definitions.html", context)

    # --- cancel, with a confirmation page; retry, a button

    def _controlled(
        self, request: HttpRequest, object_id: str, allowed: Callable[..., bool]
    ) -> tuple[Invocation, str]:
        """The invocation the page is about and its page's URL; 404 or 403 first."""
        invocation = self.get_object(request, object_id)
        if not isinstance(invocation, Invocation):  # None: no such invocation
            raise Http404(f"no invocation {object_id!r}")
        if not allowed(request, invocation):
            raise PermissionDenied
        return invocation, reverse("admin:workflows_invocation_change", args=[quote(invocation.pk)])

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        invocation, change_url = self._controlled(request, object_id, self.has_cancel_permission)
        if request.method == "POST":
            self._apply(request, [invocation], services.cancel, "Cancelled")
            return HttpResponseRedirect(change_url)
        return self._cancel_confirmation(request, [invocation], cancel_url=change_url)

    @admin.action(description="Cancel selected invocations…", permissions=["cancel"])
    def cancel_invocations(
        self, request: HttpRequest, queryset: QuerySet
    ) -> TemplateResponse | None:
        if request.POST.get("post") == "yes":
            self._apply(request, queryset, services.cancel, "Cancelled")
            return None
        summarized = queryset.prefetch_related("node_runs", "interrupts")
        return self._cancel_confirmation(request, summarized, action="cancel_invocations")

    def _cancel_confirmation(
        self,
        request: HttpRequest,
        invocations: Iterable[Invocation],
        *,
        action: str | None = None,
        cancel_url: str | None = None,
    ) -> TemplateResponse:
        summary = monitor.cancel_summary(invocations)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Cancel invocations?",
            "summary": summary,
            "cancellable": sum(1 for entry in summary if entry["cancellable"]),
            "action": action,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "back_url": cancel_url or reverse("admin:workflows_invocation_changelist"),
        }
        return TemplateResponse(
            request, "admin/workflows/invocation/cancel_confirmation.html", context
        )

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        invocation, change_url = self._controlled(request, object_id, self.has_retry_permission)
        self._apply(request, [invocation], services.retry, "Retried")
        return HttpResponseRedirect(change_url)

    @admin.action(description="Retry selected failed invocations", permissions=["retry"])
    def retry_invocations(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(request, queryset, services.retry, "Retried")

    def _apply(
        self,
        request: HttpRequest,
        invocations: Iterable[Invocation],
        operation: Callable[..., Invocation],
        done_verb: str,
    ) -> None:
        """Run a service on each invocation; report how many it changed and why others
        were refused."""
        done, refused = 0, []
        for invocation in invocations:
            try:
                operation(invocation, actor=request.user)
                done += 1
            except (WorkflowError, PermissionDenied) as exc:
                refused.append(f"{short_id(invocation)}: {exc}")
        if done:
            self.message_user(request, f"{done_verb} {done} invocation(s).", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)
