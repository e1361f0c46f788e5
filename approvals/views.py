"""Where an approve/reject link of a notification (e-mail, Slack) lands: a confirmation page.
A GET never decides; the POST from the page does, for the logged-in user the link was sent to
(a link posted to a channel: for whoever opens it and may answer)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from workflows import services
from workflows.engine.errors import ResponseValidationError, WorkflowError
from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt
from workflows.policy import answer_policy

from . import display
from .forms import ApprovalForm
from .links import read_token
from .loading import readable_row

TEMPLATE = "approvals/email_decision.html"


def _page(request: HttpRequest, status: int = 200, **context: Any) -> HttpResponse:
    # The admin's context: its header with who is logged in and the log-out link.
    return render(request, TEMPLATE, {**admin.site.each_context(request), **context}, status=status)


@require_http_methods(["GET", "POST"])
def email_decision(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = read_token(token)
    except signing.SignatureExpired:
        return _page(request, 410, problem="This link has expired. Open the approvals inbox.")
    except signing.BadSignature:
        return _page(request, 400, problem="This link is not valid.")
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    if not link.is_for(request.user):
        problem = (
            f"This link was sent to someone else, and you are logged in as "
            f"{request.user.get_username()}. Log out, open the link again and log in as the "
            "person it was sent to."
        )
        return _page(request, 403, problem=problem)
    chosen = Interrupt.objects.select_related("invocation").filter(pk=link.interrupt_id)
    interrupt = readable_row(chosen)
    if interrupt is None:
        return _page(request, 404, problem="This question no longer exists.")
    # Asked again on every visit: the question may have been reassigned since the mail.
    refusal = answer_policy().refusal(request.user, interrupt)
    if refusal:
        return _page(request, 403, problem=f"You may not answer this question now: {refusal}.")
    display.in_declared_order(interrupt)
    approve = link.decision == ApprovalForm.APPROVE
    data = {**request.POST.dict(), "decision": link.decision} if request.method == "POST" else None
    form = ApprovalForm(interrupt.response_schema, data)
    context: dict[str, Any] = {
        "interrupt": interrupt,
        "payload": display.render_value(interrupt.payload),
        "approve": approve,
        "form": form,
    }
    if interrupt.status != InterruptStatus.PENDING:
        return _page(request, 409, problem=f"This question is {interrupt.status}.", **context)
    if request.method == "POST" and form.is_valid():
        try:
            services.decide(interrupt.pk, form.response(), actor=request.user, comment=form.comment)
        except ResponseValidationError as exc:
            form.add_validation_error(exc)
        except (WorkflowError, PermissionDenied) as exc:
            return _page(request, 409, problem=display.refusal_message(exc), **context)
        else:
            return _page(request, done=True, **context)
    return _page(request, **context)
