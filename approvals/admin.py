"""The approvals inbox in Django admin: "Pending approvals" lists what the user may answer;
each item opens a decision page with a form built from its response_schema.

Seeing the inbox takes `workflows.answer_interrupt`; which items show is the answer
policy's queryset counterpart. Every change goes through workflows.services.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from workflows import services
from workflows.admin.base import ReadOnlyAdmin
from workflows.admin.display import question_cell, rewind_url
from workflows.engine.errors import ResponseValidationError, WorkflowError
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.engine.values import is_possible_id
from workflows.inbox import (
    INBOX_ORDER,
    VIEWS,
    CappedPaginator,
    handovers,
    ladder_summary,
    search,
    waiting_for,
)
from workflows.models import Decision, Interrupt, NodeRun
from workflows.policy import (
    ANSWER_PERMISSION,
    REASSIGN_PERMISSION,
    answer_policy,
    can_reassign,
)
from workflows.registry import registry

from . import dashboard, display, live, passkeys, rewind
from .forms import ApprovalForm, comment_of, is_approval
from .gates import GateForm, decision_form, outcome_message
from .inbox_views import view_tabs
from .loading import readable_row, readable_rows
from .models import Passkey, PendingApproval
from .questions import assignee_list, monitor_url, replaced_decisions, vote_of


class InboxViewFilter(admin.SimpleListFilter):
    """The inbox views (DESIGN 4.3). The view is applied by `get_queryset`, as "delegated"
    reads other people's questions, outside what the answer rule alone gives."""

    title, parameter_name = "view", "view"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(VIEWS.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset


class WorkflowFilter(admin.SimpleListFilter):
    """By workflow, named from the registry: no scan of the inbox to list the choices."""

    title, parameter_name = "workflow", "workflow"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(d.name, d.name) for d in registry.definitions()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(workflow_name=self.value()) if self.value() else queryset


@admin.register(PendingApproval)
class PendingApprovalAdmin(ReadOnlyAdmin):
    # Six columns, the workflow under the question: the list fits 1,280 px beside the
    # admin's navigation and the filters, with no column scrolled out of sight.
    list_display = ["question", "priority_badge", "for_whom", "asked", "due", "progress"]
    list_display_links = ["question"]
    list_filter = [InboxViewFilter, WorkflowFilter]
    search_fields = ["message", "workflow_name", "payload"]  # searched by inbox.search
    ordering = INBOX_ORDER  # urgent first, then the soonest due, then who waited longest
    list_select_related = ["claimed_by"]
    list_per_page = 50
    # One count per page, not two, and stopped at HITL["INBOX_COUNT_LIMIT"] rows: on a
    # million pending questions counting them all would cost more than the page.
    show_full_result_count = False
    paginator = CappedPaginator
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice: a scan each
    actions = ["approve_selected", "reject_selected"]
    change_form_template = "approvals/decision.html"
    change_list_template = "approvals/change_list.html"  # says why the list is empty

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            return self._permission_needed(request)
        context = {
            "title": "Pending approvals",
            "inbox_views": view_tabs(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    def _permission_needed(self, request: HttpRequest) -> HttpResponse:
        """What it takes to see the inbox and who can give it, in the admin's layout."""
        users = get_user_model()
        granters = users.objects.filter(is_active=True, is_superuser=True).order_by(
            users.USERNAME_FIELD
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "Pending approvals",
            "permission": Permission.objects.filter(
                content_type__app_label="workflows", codename="answer_interrupt"
            ).first(),
            "permission_code": ANSWER_PERMISSION,
            "granters": [user.get_username() for user in granters[:5]],
        }
        return TemplateResponse(request, "approvals/permission_needed.html", context, status=403)

    # -- who sees it -----------------------------------------------------------------------
    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(ANSWER_PERMISSION)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(ANSWER_PERMISSION)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        decided = (
            Decision.objects.filter(interrupt_id=OuterRef("pk"))
            .values("interrupt_id")
            .annotate(n=Count("pk"))
            .values("n")
        )
        view = request.GET.get(InboxViewFilter.parameter_name)
        # The list never shows the wide JSON columns; leaving them out keeps sorts small.
        return (
            waiting_for(
                request.user, view if view in VIEWS else None, PendingApproval.objects.all()
            )
            .defer("payload", "response_schema", "response")
            .annotate(decided=Coalesce(Subquery(decided), 0))
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        return search(queryset, search_term), False  # no duplicates: no join is added

    # -- columns ---------------------------------------------------------------------------
    @admin.display(description="what is asked")
    def question(self, obj: Interrupt) -> str:
        return question_cell(obj, obj.workflow_name)

    @admin.display(description="priority", ordering="priority_rank")
    def priority_badge(self, obj: Interrupt) -> str:
        return display.priority_badge(obj.priority)

    @admin.display(description="for whom")
    def for_whom(self, obj: Interrupt) -> str:
        who = ", ".join(obj.assignees) or "anyone who may answer"
        if obj.claimed_by is not None:
            who += f" (claimed by {obj.claimed_by.get_username()})"
        return who

    # "asked 3 hours ago", sorted by that time: the oldest first reads as ascending, as the
    # column's arrow says (a "waited" column would count down under an ascending arrow).
    @admin.display(description="asked", ordering="created_at")
    def asked(self, obj: Interrupt) -> str:
        return f"{display.waited(obj.created_at)} ago"

    # The due date (a target) above the deadline (when the timeout policy applies).
    @admin.display(description="due", ordering=F("due_at").asc(nulls_last=True))
    def due(self, obj: Interrupt) -> str:
        target = display.due_badge(obj.due_at)
        if obj.deadline is None:
            return format_html("{}{}", target, display.countdown(None))
        return format_html(
            "{}deadline {}<br><small>then {}</small>",
            target,
            display.countdown(obj.deadline),
            display.timeout_summary(display.in_declared_order(obj).on_timeout),
        )

    @admin.display(description="approvals")
    def progress(self, obj: Interrupt) -> str:
        decided = obj.decided  # type: ignore[attr-defined]  # annotated by get_queryset
        return f"{decided} of {obj.quorum}" if obj.quorum > 1 else "-"

    # -- bulk decisions ---------------------------------------------------------------------
    @admin.action(description="Approve selected (where a plain yes is a valid answer)")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide_all(request, queryset, approved=True)

    @admin.action(description="Reject selected (where a plain no is a valid answer)")
    def reject_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide_all(request, queryset, approved=False)

    def _decide_all(self, request: HttpRequest, queryset: QuerySet, *, approved: bool) -> None:
        verb = "Approved" if approved else "Rejected"
        answered, skipped = 0, []
        for interrupt in queryset.defer(None):  # the schemas are needed here
            label = Truncator(interrupt.message or interrupt.pk).chars(60)
            if not is_approval(interrupt.response_schema):
                skipped.append(f"{label}: its answer is not a yes/no; open it to answer")
                continue
            try:
                services.decide(interrupt.pk, {"approved": approved}, actor=request.user)
                answered += 1
            except (WorkflowError, PermissionDenied) as exc:
                skipped.append(f"{label}: {exc}")
        level = messages.SUCCESS if answered else messages.WARNING
        self.message_user(request, f"{verb} {answered}; skipped {len(skipped)}.", level)
        for reason in skipped:
            self.message_user(request, f"Skipped {reason}", messages.WARNING)

    # -- the decision page -----------------------------------------------------------------
    def get_urls(self) -> list:
        events = self.admin_site.admin_view(live.question_events)
        name = "approvals_pendingapproval_events"  # the page's live feed, beside it
        own = [path("<path:object_id>/events/", events, name=name)]
        return [*own, *rewind.urls(self.admin_site), *super().get_urls()]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        interrupt_id = unquote(object_id)
        interrupt = None
        if is_possible_id(interrupt_id):  # else no row has it (PostgreSQL fails on a NUL)
            chosen = Interrupt.objects.select_related("invocation", "claimed_by")
            interrupt = readable_row(chosen.filter(pk=interrupt_id))
        if interrupt is None:
            raise Http404(f"no interrupt {interrupt_id!r}")
        display.in_declared_order(interrupt)
        may_answer = answer_policy().can_answer(request.user, interrupt)
        may_reassign = can_reassign(request.user, interrupt)
        if not (
            may_answer or may_reassign
        ):  # policy.may_open_question, both parts kept for the page
            # Why, on a page with the way back (the question itself stays hidden).
            context = {
                **self.admin_site.each_context(request),
                "title": "Not yours to answer",
                "reason": answer_policy().refusal(request.user, interrupt),
            }
            return TemplateResponse(request, "approvals/refused.html", context, status=403)
        pending = interrupt.status == InterruptStatus.PENDING
        already = interrupt.decisions.filter(actor=request.user.pk).exists()
        form = None
        if pending and may_answer and not already:
            form = decision_form(interrupt, request.user)
        standing_in = vote_of(request.user, interrupt) if form is not None else None
        if request.method == "POST":
            action = request.POST.get("_action", "decide")
            if action not in ("decide", "challenge"):
                return self._mark(request, interrupt, action)
            # Late, repeated or forbidden answers too: the service says why.
            form = decision_form(interrupt, request.user, request.POST)
            if action == "challenge":  # what the passkey signs for this answer
                return passkeys.decision_challenge(request, interrupt, form)
            if form.is_valid():
                response = self._decide(request, interrupt, form)
                if response is not None:
                    return response
        return TemplateResponse(
            request,
            self.change_form_template,
            {
                **self.admin_site.each_context(request),
                **self._page_context(request, interrupt, form),
                "may_reassign": may_reassign and pending,
                "already_decided": already,
                "standing_in": standing_in,
                **(extra_context or {}),
            },
        )

    def _mark(self, request: HttpRequest, interrupt: Interrupt, action: str) -> HttpResponse:
        """Claim, release or reassign; report the outcome and show the page again."""
        assignees = assignee_list(request.POST.get("assignees", ""))
        operations = {
            "claim": (
                lambda: services.claim(interrupt.pk, actor=request.user),
                "Claimed: others see that you are working on it.",
            ),
            "release": (
                lambda: services.release(interrupt.pk, actor=request.user),
                "Released: nobody has claimed it now.",
            ),
            "reassign": (
                lambda: services.reassign(interrupt.pk, assignees, actor=request.user),
                f"Reassigned to {', '.join(assignees) or 'anyone who may answer'}.",
            ),
        }
        try:
            if action not in operations:
                raise ResponseValidationError(interrupt.pk, "_action", f"unknown action {action!r}")
            operation, outcome = operations[action]
            operation()
            self.message_user(request, outcome, messages.SUCCESS)
        except (WorkflowError, PermissionDenied) as exc:
            self.message_user(request, display.refusal_message(exc), messages.ERROR)
            return HttpResponseRedirect(request.path)
        interrupt.refresh_from_db()
        if not can_reassign(request.user, interrupt):  # handed over: the page is not theirs now
            return HttpResponseRedirect(self._next_url(request, interrupt))
        return HttpResponseRedirect(request.path)

    def _decide(self, request: HttpRequest, interrupt: Interrupt, form: Any) -> HttpResponse | None:
        claimed_by = interrupt.claimed_by
        try:
            decision = services.decide(
                interrupt.pk,
                form.response(),
                actor=request.user,
                comment=comment_of(form),
                assertion=request.POST.get("assertion") or None,
            )
        except ResponseValidationError as exc:
            form.add_validation_error(exc)
            return None
        except (WorkflowError, PermissionDenied) as exc:
            self.message_user(request, display.refusal_message(exc), messages.ERROR)
            return HttpResponseRedirect(request.path)
        if claimed_by is not None and claimed_by.pk != request.user.pk:
            self.message_user(
                request,
                f"{claimed_by.get_username()} had claimed this question; your decision counts.",
                messages.WARNING,
            )
        self.message_user(request, outcome_message(decision), messages.SUCCESS)
        return HttpResponseRedirect(self._next_url(request, interrupt))

    def _next_url(self, request: HttpRequest, current: Interrupt) -> str:
        following = self.get_queryset(request).exclude(pk=current.pk)
        next_id = following.values_list("pk", flat=True).first()
        if next_id is None:
            return reverse("admin:approvals_pendingapproval_changelist")
        return reverse("admin:approvals_pendingapproval_change", args=[quote(next_id)])

    def _page_context(
        self, request: HttpRequest, interrupt: Interrupt, form: Any
    ) -> dict[str, Any]:
        invocation = interrupt.invocation
        upstream = readable_rows(
            NodeRun.objects.filter(
                invocation=invocation, status=NodeStatus.COMPLETED, output__isnull=False
            ).exclude(parent_path="")
        )
        decisions = readable_rows(interrupt.decisions.select_related("actor"))
        replaced = replaced_decisions(interrupt, decisions)
        return {
            "title": interrupt.message or f"Interrupt {interrupt.pk}",
            "opts": self.model._meta,
            "interrupt": interrupt,
            "invocation": invocation,
            "payload": display.render_value(interrupt.payload),
            "invocation_input": display.render_value(invocation.input),
            "upstream": [(run.path, display.render_value(run.output)) for run in upstream],
            "decisions": [
                (decision, display.answer_cell(decision.response), decision.pk in replaced)
                for decision in decisions
            ],
            "form": form,
            "is_approval": isinstance(form, ApprovalForm),
            "is_gate": isinstance(form, GateForm),
            "args": isinstance(form, GateForm) and display.render_value(form.proposal),
            "media": self.media + form.media if form is not None else self.media,
            "priority": display.priority_badge(interrupt.priority),
            "due": display.due_target(interrupt.due_at),
            "deadline": display.countdown(interrupt.deadline),
            "on_timeout": display.timeout_policy(interrupt.on_timeout, brief=True),
            "ladder": ladder_summary(interrupt),
            "handovers": handovers(interrupt),
            "claimed_by_other": interrupt.claimed_by_id not in (None, request.user.pk),
            "may_release": interrupt.claimed_by_id == request.user.pk
            or request.user.has_perm(REASSIGN_PERMISSION),
            "monitor_url": request.user.has_perm("workflows.view_invocation")
            and monitor_url(invocation.pk),
            "has_view_permission": True,
            "rewind_url": rewind_url(interrupt, request.user),
            "has_passkey": interrupt.require_signature
            and Passkey.objects.filter(user=request.user.pk).exists(),
        }

    class Media:
        css = {"all": ["approvals/approvals.css"]}
        js = ["approvals/countdown.js", "approvals/passkeys.js", "approvals/live.js"]


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    """Decisions are immutable: listed and shown, never changed or deleted here. The
    approvals dashboard (approvals/dashboard.py) is served beside them."""

    list_display = ["question", "actor", "on_behalf_of", "answer", "comment", "created_at"]
    list_select_related = ["interrupt", "actor", "on_behalf_of"]
    search_fields = ["interrupt__id", "interrupt__message", "comment"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]  # the latest first
    fields = readonly_fields = (
        "interrupt",
        "actor",
        "on_behalf_of",
        "answer",
        "comment",
        "created_at",
    )

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.dashboard_view)
        return [path("dashboard/", view, name="approvals_dashboard"), *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        return dashboard.dashboard_view(request, self.admin_site)

    @admin.display(description="question", ordering="interrupt__message")
    def question(self, obj: Decision) -> str:
        return Truncator(obj.interrupt.message or obj.interrupt_id).chars(80)

    @admin.display(description="answer")
    def answer(self, obj: Decision) -> str:
        return display.one_line(obj.response)
