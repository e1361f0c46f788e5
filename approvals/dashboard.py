"""The approvals dashboard, a page of the admin (served by DecisionAdmin's URLs, linked from
the admin index): pictures of the open questions and of the period's decisions.

Who sees it: staff with `workflows.view_interrupt` and `workflows.view_decision`, the
permissions of the monitor's question and decision pages, which list every question and
decision. So the dashboard counts all of them, as those pages do; it is not scoped by the
answer policy, which says who may answer a question, not who may look at the record. A
person who may only answer sees their inbox, not their colleagues' approval rates.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.safestring import mark_safe

from workflows.policy import DASHBOARD_PERMISSIONS, may_view_dashboard
from workflows.registry import registry

from . import charts
from .figures import DEFAULT_PERIOD, PERIODS, DashboardFigures, dashboard_figures

TEMPLATE = "approvals/dashboard.html"
TITLE = "Approvals dashboard"


class DashboardFilters(forms.Form):
    """The query string: a period of PERIODS days and a registered workflow (or all)."""

    period = forms.TypedChoiceField(
        choices=[(days, f"last {days} days") for days in PERIODS],
        coerce=int,
    )
    workflow = forms.ChoiceField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted(definition.name for definition in registry.definitions())
        workflow = cast(forms.ChoiceField, self.fields["workflow"])
        workflow.choices = [("", "all workflows"), *((name, name) for name in names)]


def pictures(figures: DashboardFigures) -> list[dict[str, Any]]:
    """Each chart with its heading and what it shows, in page order."""
    per_approver = [(approver.name, approver.timing) for approver in figures.approvers]
    return [
        {
            "heading": "Open questions by age and priority",
            "about": "Each bar is an age; its parts are priorities. The open questions as "
            "they are now, whatever the period.",
            "svg": charts.open_by_age_chart(figures.open_by_age),
        },
        {
            "heading": "Overdue per workflow",
            "about": "Open questions past their due date, out of each workflow's open ones.",
            "svg": charts.overdue_chart(figures.load),
        },
        {
            "heading": "Time to decision per workflow",
            "about": "From a question being asked to each decision on it: the median and the "
            "90th percentile, on a log scale.",
            "svg": charts.timing_chart(
                list(figures.per_workflow.items()),
                "time-per-workflow",
                "Time to decision per workflow",
            ),
        },
        {
            "heading": "Time to decision per approver",
            "about": "The same, for each person's decisions.",
            "svg": charts.timing_chart(
                per_approver, "time-per-approver", "Time to decision per approver"
            ),
        },
        {
            "heading": "Approval rate per approver",
            "about": "The share of each person's approve/reject votes that approve. Outlined "
            "and marked ⚑: a possible rubber stamp (nearly everything approved within seconds).",
            "svg": charts.approval_rate_chart(figures.approvers, figures.rule),
        },
    ]


def dashboard_view(request: HttpRequest, site: admin.AdminSite = admin.site) -> HttpResponse:
    context: dict[str, Any] = {**site.each_context(request), "title": TITLE}
    if not may_view_dashboard(request.user):
        context["permissions"] = DASHBOARD_PERMISSIONS
        return TemplateResponse(request, TEMPLATE, context, status=403)
    filters = DashboardFilters({"period": str(DEFAULT_PERIOD), **request.GET.dict()})
    context["filters"] = filters
    if not filters.is_valid():  # an unknown period or workflow: said, nothing counted
        return TemplateResponse(request, TEMPLATE, context, status=400)
    figures = dashboard_figures(
        days=filters.cleaned_data["period"], workflow=filters.cleaned_data["workflow"]
    )
    # Safe: the chart builders escape every text they write.
    charts_shown = [{**chart, "svg": mark_safe(chart["svg"])} for chart in pictures(figures)]
    context.update(figures=figures, charts=charts_shown)
    return TemplateResponse(request, TEMPLATE, context)
