"""E-mail to the assignees when an interrupt opens (HITL["EMAIL_NOTIFICATIONS"]), through
Django's e-mail backend, with signed approve/reject links for yes/no questions."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.mail import EmailMessage, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.text import Truncator

from workflows.conf import hitl_settings
from workflows.engine.principals import parse_assignee
from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt
from workflows.policy import answer_policy

from .forms import ApprovalForm, is_approval
from .links import DecisionLink, absolute_url

logger = logging.getLogger(__name__)


def recipients(interrupt: Interrupt) -> list[Any]:
    """Active assignees with an e-mail address whom the answer policy lets answer."""
    users = get_user_model()
    names: dict[str, set[str]] = {"user": set(), "group": set()}
    for kind, name in map(parse_assignee, interrupt.assignees):
        names[kind].add(name)
    named = Q(**{f"{users.USERNAME_FIELD}__in": names["user"]}) | Q(
        groups__in=Group.objects.filter(name__in=names["group"])
    )
    candidates = users.objects.filter(named, is_active=True).exclude(email="").distinct()
    policy = answer_policy()
    return [user for user in candidates if policy.can_answer(user, interrupt)]


def _answerable_by_link(interrupt: Interrupt) -> bool:
    """A yes/no question whose form asks nothing else that is required, and no passkey's
    signature (given on the question's own page)."""
    if interrupt.require_signature or not is_approval(interrupt.response_schema):
        return False
    form = ApprovalForm(interrupt.response_schema)
    return not any(f.required for name, f in form.fields.items() if name != "decision")


def subject_line(interrupt: Interrupt) -> str:
    """The mail's subject: one line (a header may not hold a line break), kept short."""
    question = " ".join((interrupt.message or "").split()) or interrupt.pk
    return f"Decision needed: {Truncator(question).chars(70)}"


def notify_assignees(interrupt_id: str) -> int:
    """Send each assignee an e-mail about the interrupt; return how many were sent. Each
    mail is sent on its own: one that fails is logged and the others still go."""
    interrupt = Interrupt.objects.select_related("invocation").filter(pk=interrupt_id).first()
    if interrupt is None or interrupt.status != InterruptStatus.PENDING:
        return 0
    base = hitl_settings.EMAIL_BASE_URL.rstrip("/")
    page = base + reverse("admin:approvals_pendingapproval_change", args=[quote(interrupt.pk)])
    by_link = _answerable_by_link(interrupt)
    subject = subject_line(interrupt)
    sent = 0
    with get_connection() as connection:
        for user in recipients(interrupt):
            try:
                _message(interrupt, user, subject, page, by_link, connection).send()
            except Exception:
                logger.exception(
                    "could not e-mail %s about interrupt %s", user.get_username(), interrupt.pk
                )
            else:
                sent += 1
    return sent


def _message(
    interrupt: Interrupt, user: Any, subject: str, page: str, by_link: bool, connection: Any
) -> EmailMessage:
    def link(decision: str) -> str | bool:
        return by_link and absolute_url(DecisionLink(interrupt.pk, user.pk, decision))

    context = {
        "interrupt": interrupt,
        "user": user,
        "page_url": page,
        "approve_url": link("approve"),
        "reject_url": link("reject"),
        "max_age_hours": hitl_settings.EMAIL_LINK_MAX_AGE // 3600,
    }
    body = render_to_string("approvals/email/decision_needed.txt", context)
    return EmailMessage(subject=subject, body=body, to=[user.email], connection=connection)


def on_interrupt_opened(sender: Any, interrupt_id: str, **kwargs: Any) -> None:
    """Receiver of workflows.signals.interrupt_opened. A mail failure is logged, never
    raised: the engine's commit that opened the interrupt must not see it."""
    if not hitl_settings.EMAIL_NOTIFICATIONS:
        return
    try:
        notify_assignees(interrupt_id)
    except Exception:
        logger.exception("could not e-mail the assignees of interrupt %s", interrupt_id)
