""" "Change this answer" (DESIGN 3.8) in the admin: on an answered question, the plan first
(the steps that run again, the questions asked again, the effects that would repeat, each
with a box to confirm it), then the decision page's form for the new answer and a comment.
A question people decide (a quorum, or a signature) is changed by a new round of decisions
instead: the page opens it and leads to the decision page.

Every write goes through `services.rewind` and `services.reopen`; a refusal stores nothing
and is said on the page."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from workflows import services
from workflows.admin.display import REWIND_URL_NAME
from workflows.engine.errors import (
    EffectsWouldRepeatError,
    NotRewindableError,
    ResponseValidationError,
    WorkflowError,
)
from workflows.engine.rewind import RewindPlan
from workflows.engine.values import is_possible_id
from workflows.models import Interrupt
from workflows.policy import rewind_refusal

from . import display
from .forms import ROOT, ApprovalForm, SchemaForm
from .gates import GateForm, decision_form
from .loading import readable_row

TEMPLATE = "approvals/rewind.html"
URL_NAME = REWIND_URL_NAME.removeprefix("admin:")
# What each NotRewindableError reason means to the person on the page.
REASONS = {
    "pending": "it waits for an answer: answer it on its decision page",
    "superseded": "a later change took it out of the invocation",
    "cancelled": "its invocation was cancelled",
    "not_answered": "it expired without an answer; retrying the invocation asks it again",
    "running": "the invocation is running right now; try again in a moment",
    "no_lineage": "its invocation ran before changes could be traced; it cannot be rewound",
    "not_decided": "one person answers it: change the answer with the form",
}


def urls(admin_site: admin.AdminSite) -> list:
    """The page's URL, beside the decision page's."""
    view = admin_site.admin_view(change_answer)
    return [path("<path:object_id>/rewind/", view, {"admin_site": admin_site}, name=URL_NAME)]


def by_decisions(interrupt: Interrupt) -> bool:
    """Answered by people's decisions: changed by a new round of them, not by one answer."""
    return interrupt.quorum > 1 or interrupt.require_signature


def step_label(path: str) -> str:
    """A node run's path as a person reads it: `expense_approval@1/decide@2` is "decide
    (run 2)", a nested step names its workflows ("large expense > manager approval")."""
    segments = [segment.partition("@") for segment in path.split("/")]
    names = [name.replace("_", " ") for name, _, _ in segments]
    label = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} ".join(names[1:] or names)
    run = segments[-1][2]
    return f"{label} (run {run})" if run not in ("", "1") else label


def change_answer(
    request: HttpRequest, object_id: str, admin_site: admin.AdminSite
) -> HttpResponse:
    interrupt_id = unquote(object_id)
    chosen = Interrupt.objects.select_related("invocation", "resolved_by")
    interrupt = (
        readable_row(chosen.filter(pk=interrupt_id)) if is_possible_id(interrupt_id) else None
    )
    if interrupt is None:
        raise Http404(f"no interrupt {interrupt_id!r}")
    display.in_declared_order(interrupt)
    refusal = rewind_refusal(request.user, interrupt)
    if refusal:
        return _refused(request, admin_site, refusal)
    page = ChangePage(request, admin_site, interrupt)
    if request.method == "POST":
        return page.post()
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    return page.render()


def _refused(request: HttpRequest, admin_site: admin.AdminSite, reason: str) -> HttpResponse:
    context = {
        **admin_site.each_context(request),
        "title": "Not yours to change",
        "reason": reason,
        "change": True,
    }
    return TemplateResponse(request, "approvals/refused.html", context, status=403)


class ChangePage:
    """One request to the page: its plan, its form, and what the services said."""

    def __init__(
        self, request: HttpRequest, admin_site: admin.AdminSite, interrupt: Interrupt
    ) -> None:
        self.request, self.admin_site, self.interrupt = request, admin_site, interrupt
        self.form: forms.Form | None = None
        if not by_decisions(interrupt):
            self.form = decision_form(interrupt, request.user)
            _prefill(self.form, interrupt.response)
        self.problem = ""
        self.unconfirmed: set[tuple[str, str]] = set()
        self.confirmed: set[tuple[str, str]] = set()

    def post(self) -> HttpResponse:
        post = self.request.POST
        comment = post.get("_comment", "")[:10000]
        if post.get("_action") == "reopen":
            return self._reopen(comment)
        if self.form is None:
            self.problem = "People decide this question: open a new round of decisions."
            return self.render(409)
        self.form = decision_form(self.interrupt, self.request.user, post)
        self.confirmed = _confirmed(post.getlist("confirm"))
        if not self.form.is_valid():
            return self.render(400)
        response = self.form.response()  # type: ignore[attr-defined]  # SchemaForm, GateForm
        try:
            services.rewind(
                self.interrupt.pk,
                response,
                actor=self.request.user,
                comment=comment,
                confirm_effects=sorted(self.confirmed),
            )
        except ResponseValidationError as exc:
            self.form.add_validation_error(exc)  # type: ignore[attr-defined]
            return self.render(400)
        except EffectsWouldRepeatError as exc:
            self.unconfirmed = {(e["path"], e["name"]) for e in exc.effects} - self.confirmed
            self.problem = (
                "Nothing was changed: confirm each effect that would happen again, "
                "or leave the answer as it is."
            )
            return self.render(409)
        except PermissionDenied as exc:
            return _refused(self.request, self.admin_site, str(exc))
        except WorkflowError as exc:
            self.problem = f"Nothing was changed: {_reason(exc)}."
            return self.render(409)
        if response == self.interrupt.response:  # a success that changes nothing
            messages.info(self.request, "The answer is the one already given: nothing changed.")
        else:
            messages.success(self.request, "Answer changed: what depended on it runs again.")
        return HttpResponseRedirect(self._after_url())

    def _reopen(self, comment: str) -> HttpResponse:
        try:
            services.reopen(self.interrupt.pk, actor=self.request.user, comment=comment)
        except PermissionDenied as exc:
            return _refused(self.request, self.admin_site, str(exc))
        except WorkflowError as exc:
            self.problem = f"No new round was opened: {_reason(exc)}."
            return self.render(409)
        messages.success(
            self.request,
            "A new round of decisions is open; the earlier answer holds until it is decided.",
        )
        change = reverse("admin:approvals_pendingapproval_change", args=[quote(self.interrupt.pk)])
        return HttpResponseRedirect(change)

    def _after_url(self) -> str:
        """The invocation's monitor, where the runs superseded and run again show; the
        question's page for whoever may not see the monitor."""
        if self.request.user.has_perm("workflows.view_invocation"):
            invocation = quote(self.interrupt.invocation_id)
            return reverse("admin:workflows_invocation_change", args=[invocation])
        return reverse("admin:approvals_pendingapproval_change", args=[quote(self.interrupt.pk)])

    def _plan(self) -> RewindPlan | None:
        try:
            return services.plan_rewind(self.interrupt.pk, actor=self.request.user)
        except WorkflowError as exc:
            self.problem = self.problem or f"This answer cannot be changed now: {_reason(exc)}."
            self.form = None
            return None

    def render(self, status: int = 200) -> HttpResponse:
        plan = self._plan()
        if plan is None and status == 200:
            status = 409
        interrupt = self.interrupt
        questions = {}
        if plan is not None and plan.questions:
            asked = Interrupt.objects.filter(pk__in=plan.questions).values_list("pk", "message")
            questions = dict(asked)
        context = {
            **self.admin_site.each_context(self.request),
            "title": "Change this answer",
            "opts": interrupt._meta,
            "interrupt": interrupt,
            "decision_url": reverse(
                "admin:approvals_pendingapproval_change", args=[quote(interrupt.pk)]
            ),
            "answer": display.render_value(interrupt.response),
            "payload": display.render_value(interrupt.payload),
            "plan": plan,
            "reopened": [(p, step_label(p)) for p in plan.reopened] if plan else [],
            "superseded": [(p, step_label(p)) for p in plan.superseded] if plan else [],
            "questions": [(q, questions.get(q) or q) for q in plan.questions] if plan else [],
            "effects": _effect_rows(plan, self.confirmed, self.unconfirmed) if plan else [],
            "by_decisions": by_decisions(interrupt),
            "form": self.form,
            "is_approval": isinstance(self.form, ApprovalForm | GateForm),
            "args_form": getattr(self.form, "args_form", None),
            "comment": self.request.POST.get("_comment", ""),
            "problem": self.problem,
            "media": forms.Media(css={"all": ["approvals/approvals.css"]})
            + (self.form.media if self.form is not None else forms.Media()),
        }
        return TemplateResponse(self.request, TEMPLATE, context, status=status)


def _effect_rows(
    plan: RewindPlan, confirmed: set[tuple[str, str]], unconfirmed: set[tuple[str, str]]
) -> list[dict[str, Any]]:
    rows = []
    for effect in plan.effects:
        key = (effect["path"], effect["name"])
        rows.append(
            {
                **effect,
                "step": step_label(effect["path"]),
                "value": json.dumps(list(key)),
                "checked": key in confirmed,
                "missing": key in unconfirmed,
            }
        )
    return rows


def _confirmed(values: list[str]) -> set[tuple[str, str]]:
    """The (path, name) pairs of the boxes ticked; what is not such a pair is no box."""
    pairs = set()
    for value in values:
        try:
            pair = json.loads(value)
        except ValueError:
            continue
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, str) for v in pair):
            pairs.add((pair[0], pair[1]))
    return pairs


def _reason(exc: Exception) -> str:
    if isinstance(exc, NotRewindableError):
        return REASONS.get(exc.reason, exc.reason)
    return display.refusal_message(exc)


def _prefill(form: forms.Form, answer: Any) -> None:
    """Start the form from the current answer: the change is usually to one field."""
    if not isinstance(form, SchemaForm) or answer is None:
        return
    if not form.is_object:
        form.initial[ROOT] = _initial(form.fields[ROOT], answer)
        return
    if not isinstance(answer, dict):
        return
    for name, field_path in form.paths.items():
        value: Any = answer
        for key in field_path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            form.initial[name] = _initial(form.fields[name], value)
    if isinstance(form, ApprovalForm) and isinstance(answer.get("comment"), str):
        form.initial.setdefault("comment", answer["comment"])


def _initial(field: forms.Field, value: Any) -> Any:
    # Choices are offered as JSON text (forms._choices): the value is shown chosen so.
    if isinstance(field, forms.TypedMultipleChoiceField) and isinstance(value, list):
        return [json.dumps(v) for v in value]
    if isinstance(field, forms.TypedChoiceField):
        return json.dumps(value)
    return value
