"""Invocation monitor: each invocation with a picture of its graph coloured by status, its
node runs, its questions and its event timeline; a page per registered workflow with its
graph.

Every page here only shows ("View", never "Change"). The admin actions are the only way to
change anything, each behind its own permission, and each goes through workflows.services.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from . import services, webhooks
from .engine.errors import WorkflowError
from .engine.status import InterruptStatus, NodeStatus
from .graph import with_statuses, workflow_graph
from .models import (
    OPEN_STATUSES,
    Decision,
    Interrupt,
    Invocation,
    NodeRun,
    SessionEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from .policy import answer_policy
from .registry import UnknownWorkflowError, registry

# Where a pending question links to: the approvals inbox's decision page when that app is
# installed, else the read-only interrupt page of this admin.
DECISION_URL_NAMES = ["admin:approvals_pendingapproval_change", "admin:workflows_interrupt_change"]


def decision_url(interrupt_id: str) -> str | None:
    """The page where a person answers a pending interrupt."""
    for name in DECISION_URL_NAMES:
        try:
            return reverse(name, args=[quote(interrupt_id)])
        except NoReverseMatch:
            continue
    return None


def answer_url(interrupt: Interrupt, user: Any) -> str | None:
    """The decision page of `interrupt` while `user` may answer it (the answer policy says
    so and they have not decided yet), else None."""
    decided = any(decision.actor_id == user.pk for decision in interrupt.decisions.all())
    if (
        interrupt.status == InterruptStatus.PENDING
        and not decided
        and answer_policy().can_answer(user, interrupt)
    ):
        return decision_url(interrupt.id)
    return None


def question_url(interrupt: Interrupt, user: Any) -> str:
    """Where the monitor links a question: its decision page while `user` may answer it,
    else its read-only record."""
    return answer_url(interrupt, user) or reverse(
        "admin:workflows_interrupt_change", args=[quote(interrupt.id)]
    )


def short_id(obj: Invocation | Interrupt) -> str:
    """A UUID's first 8 characters: enough to tell rows apart, and a list stays narrow."""
    return str(obj.pk)[:8]


def question_cell(interrupt: Interrupt, *details: str) -> str:
    """A question in a list: its message, and `details` in small print beneath it (one
    column instead of several, so the list fits 1,280 px beside the admin's sidebars)."""
    return format_html(
        '{}<br><small class="quiet">{}</small>',
        Truncator(interrupt.message or f"answer {interrupt.pk}").chars(90),
        " · ".join(details),
    )


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_block(value: Any) -> str:
    """A JSON value as an indented block for a read-only page."""
    return format_html('<pre class="hitl-json">{}</pre>', pretty_json(value))


def human_duration(delta: timedelta) -> str:
    """'0.42 s', '12 s', '3 min 5 s', '2 h 3 min', '3 d 4 h'."""
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 10:
        return f"{seconds:.2f} s"
    whole = int(seconds)
    for unit, size, smaller, smaller_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            return f"{whole // size} {unit} {whole % size // smaller_size} {smaller}"
    return f"{whole} s"


def definition_graph(name: str, version: str | None = None) -> dict[str, Any] | None:
    """The graph of a registered workflow (a version the invocation ran on if it is still
    registered, else the latest), or None when no such workflow is registered."""
    try:
        definition = registry.get(name, version)
    except UnknownWorkflowError:
        try:
            definition = registry.get(name)
        except UnknownWorkflowError:
            return None
    return workflow_graph(definition.workflow)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewing only: every state change goes through services."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# --- what the invocation page shows -----------------------------------------------------------


def node_run_rows(node_runs: Iterable[NodeRun], now: datetime) -> list[dict[str, Any]]:
    rows = []
    for run in node_runs:
        final = NodeStatus(run.status).is_final
        rows.append(
            {
                "run": run,
                "depth": run.path.count("/"),
                "segment": run.path.rpartition("/")[2],
                "duration": human_duration((run.updated_at if final else now) - run.created_at),
                "open": not final,
                "output": None if run.output is None else pretty_json(run.output),
            }
        )
    return rows


def event_rows(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    """Each event with its time and what it carried, as (label, text) pairs."""
    rows = []
    first: float | None = None
    for event in events:
        first = event.timestamp if first is None else first
        carried = []
        if event.output is not None:
            carried.append(("output", pretty_json(event.output)))
        if event.route:
            carried.append(("route", event.route))
        for call in event.function_calls:
            args = pretty_json(call.get("args"))
            carried.append((f"function call {call.get('name')} ({call.get('id')})", args))
        if event.long_running_tool_ids:
            carried.append(("waits for", ", ".join(event.long_running_tool_ids)))
        for response in event.function_responses:
            label = f"answer to {response.get('id')}"
            carried.append((label, pretty_json(response.get("response"))))
        if event.error:
            carried.append(("error", event.error))
        rows.append(
            {
                "event": event,
                "time": datetime.fromtimestamp(event.timestamp, tz=UTC),
                "offset": human_duration(timedelta(seconds=event.timestamp - first)),
                "carried": carried,
            }
        )
    return rows


def monitor_graph(
    invocation: Invocation, node_runs: list[NodeRun], pending: list[Interrupt]
) -> dict[str, Any] | None:
    """The invocation's graph with statuses; waiting nodes link to their question (each
    pending interrupt carries its `url`)."""
    graph = definition_graph(invocation.workflow_name, invocation.workflow_version)
    if graph is None:
        return None
    graph = with_statuses(graph, node_runs)
    url_by_path = {interrupt.path: interrupt.url for interrupt in pending}
    for node in graph["nodes"]:
        for target in [node, *node["items"]]:
            if target["status"] == NodeStatus.WAITING and target["path"] in url_by_path:
                target["url"] = url_by_path[target["path"]]
    return graph


def cancel_summary(invocations: Iterable[Invocation]) -> list[dict[str, Any]]:
    """What cancelling each invocation does: open node runs stop, pending questions close."""
    summary = []
    for invocation in invocations:
        summary.append(
            {
                "invocation": invocation,
                "cancellable": invocation.status in OPEN_STATUSES,
                "node_runs": [r for r in invocation.node_runs.all() if r.status in OPEN_STATUSES],
                "questions": [
                    i for i in invocation.interrupts.all() if i.status == InterruptStatus.PENDING
                ],
            }
        )
    return summary


# --- the invocation admin -----------------------------------------------------------------------


@admin.register(Invocation)
class InvocationAdmin(ReadOnlyAdmin):
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

    class Media:
        css = {"all": ["workflows/monitor.css"]}

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
        return "; ".join(i.message or i.id for i in obj.pending_interrupts) or "-"

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

    # --- permissions of the actions

    def has_cancel_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("workflows.cancel_invocation")

    def has_retry_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("workflows.retry_invocation")

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
            *super().get_urls(),
        ]

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Invocation | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(self.monitor_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def monitor_context(self, request: HttpRequest, invocation: Invocation) -> dict[str, Any]:
        node_runs = list(invocation.node_runs.order_by("id"))
        decisions = Decision.objects.select_related("actor").order_by("id")
        interrupts = list(
            invocation.interrupts.select_related("resolved_by")
            .prefetch_related(Prefetch("decisions", queryset=decisions))
            .order_by("created_at", "id")
        )
        pending = [i for i in interrupts if i.status == InterruptStatus.PENDING]
        for interrupt in interrupts:
            interrupt.invocation = invocation  # the four-eyes rule reads who started it
            interrupt.url = question_url(interrupt, request.user)
            interrupt.response_json = (
                None if interrupt.response is None else pretty_json(interrupt.response)
            )
        rows = node_run_rows(node_runs, timezone.now())
        by_id = {interrupt.id: interrupt for interrupt in interrupts}
        for row in rows:  # a waiting run links its questions, named by what they ask
            row["waits_for"] = [by_id[i] for i in row["run"].interrupt_ids or [] if i in by_id]
        return {
            "graph": monitor_graph(invocation, node_runs, pending),
            "statuses": [status.value for status in NodeStatus],
            "node_run_rows": rows,
            "interrupts": interrupts,
            "event_rows": event_rows(invocation.events.order_by("id")),
            "can_cancel": invocation.status in OPEN_STATUSES
            and self.has_cancel_permission(request, invocation),
        }

    def definitions_view(self, request: HttpRequest) -> TemplateResponse:
        """Every registered workflow with its graph and how many invocations it has."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        counts = {
            row["workflow_name"]: row
            for row in Invocation.objects.values("workflow_name").annotate(
                total=Count("id"), waiting=Count("id", filter=Q(status=NodeStatus.WAITING))
            )
        }
        definitions = [
            {
                "definition": definition,
                "graph": workflow_graph(definition.workflow),
                "counts": counts.get(definition.name, {"total": 0, "waiting": 0}),
            }
            for definition in registry.definitions()
        ]
        return self._render(
            request, "admin/workflows/definitions.html", "Registered workflows", definitions
        )

    def definition_view(self, request: HttpRequest, name: str) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            definition = registry.get(name)
        except UnknownWorkflowError as exc:
            raise Http404(str(exc)) from None
        entry = {
            "definition": definition,
            "graph": workflow_graph(definition.workflow),
            "counts": Invocation.objects.filter(workflow_name=name).aggregate(
                total=Count("id"), waiting=Count("id", filter=Q(status=NodeStatus.WAITING))
            ),
        }
        return self._render(
            request, "admin/workflows/definitions.html", f"Workflow {name}", [entry]
        )

    def _render(
        self, request: HttpRequest, template: str, title: str, definitions: list
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "definitions": definitions,
        }
        return TemplateResponse(request, template, context)

    # --- cancel, with a confirmation page

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        invocation = self.get_object(request, object_id)
        if invocation is None:
            raise Http404(f"no invocation {object_id!r}")
        if not self.has_cancel_permission(request, invocation):
            raise PermissionDenied
        change_url = reverse("admin:workflows_invocation_change", args=[quote(invocation.pk)])
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
        summary = cancel_summary(invocations)
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
            except WorkflowError as exc:
                refused.append(f"{str(invocation.pk)[:8]}: {exc}")
        if done:
            self.message_user(request, f"{done_verb} {done} invocation(s).", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)


@admin.register(Interrupt)
class InterruptAdmin(ReadOnlyAdmin):
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
                    "claimed_by",
                    "deadline",
                    "when_overdue",
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
        "payload_json",
        "response_schema_json",
        "response_json",
    ]
    change_form_template = "admin/workflows/interrupt/change_form.html"

    class Media:
        css = {"all": ["workflows/monitor.css"]}

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

    @admin.display(description="payload")
    def payload_json(self, obj: Interrupt) -> str:
        return json_block(obj.payload)

    @admin.display(description="response schema")
    def response_schema_json(self, obj: Interrupt) -> str:
        return json_block(obj.response_schema)

    @admin.display(description="answer")
    def response_json(self, obj: Interrupt) -> str:
        return "-" if obj.response is None else json_block(obj.response)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Interrupt | None = None,
    ) -> HttpResponse:
        # The record is read-only; a pending question someone may answer links to where
        # they answer it.
        url = obj and answer_url(obj, request.user)
        context["answer_url"] = url if url != request.path else None  # no approvals inbox
        return super().render_change_form(request, context, add, change, form_url, obj)


# --- Webhooks ---------------------------------------------------------------------------------
# Endpoints are configuration, edited here; deliveries and their attempts are a read-only
# log, and "resend" goes through workflows.webhooks.


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")

    class Meta:
        model = WebhookEndpoint
        fields = ["url", "secret", "events", "is_active", "description"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["url", "description", "events", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "description"]


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ["attempted_at", "status_code", "duration_ms", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "event_type", "endpoint", "status", "attempts", "created_at"]
    list_filter = ["status", "event_type", "endpoint"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
    inlines = [WebhookAttemptInline]
    actions = ["resend"]

    @admin.action(description="Resend the selected deliveries", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = webhooks.resend(queryset)
        self.message_user(
            request,
            f"Queued {count} deliver{'y' if count == 1 else 'ies'} for a fresh round of attempts.",
            messages.SUCCESS,
        )

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.change_webhookdelivery")
