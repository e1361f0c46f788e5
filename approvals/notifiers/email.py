"""The e-mail notifier (the default of HITL["NOTIFIERS"], on when HITL["EMAIL_NOTIFICATIONS"]
is): through Django's e-mail backend, one message per recipient, with signed approve/reject
links for yes/no questions."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.mail import EmailMessage, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils.text import Truncator

from workflows.conf import hitl_settings
from workflows.engine.principals import parse_assignee
from workflows.engine.status import InterruptStatus
from workflows.models import Delegation, Interrupt
from workflows.notifications import DELEGATED, ESCALATED, OPENED, REMINDED, Undelivered
from workflows.policy import answer_policy

from ..links import decision_urls, page_url

SUBJECTS = {REMINDED: "Reminder: decision needed"}


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


def subject_line(interrupt: Interrupt, event: str = "opened") -> str:
    """The mail's subject: one line (a header may not hold a line break), kept short."""
    question = " ".join((interrupt.message or "").split()) or interrupt.pk
    return f"{SUBJECTS.get(event, 'Decision needed')}: {Truncator(question).chars(70)}"


class EmailNotifier:
    """Opened, reminded, escalated: e-mail the assignees (after an escalation, the new
    ones); delegated: e-mail the delegate. A decided question needs no mail: not told
    of it, an answer enqueues no notification."""

    events = frozenset({OPENED, REMINDED, ESCALATED, DELEGATED})
    assigned_only = True  # it mails assignees (or a delegate), never a channel

    def enabled(self) -> bool:
        return bool(hitl_settings.EMAIL_NOTIFICATIONS)

    def notify(
        self,
        event: str,
        interrupt: Interrupt,
        *,
        delegation: Delegation | None = None,
        only: list[str] | None = None,
        **context: Any,
    ) -> None:
        """Send each recipient a message of their own; when some fail, raise Undelivered
        naming each of them, so that the retry (`only` their user ids) repeats no mail."""
        if interrupt.status != InterruptStatus.PENDING:
            return
        people = [delegation.delegate] if delegation is not None else recipients(interrupt)
        if only is not None:
            people = [user for user in people if str(user.pk) in only]
        people = [user for user in people if user.email]
        failures: dict[str, str] = {}
        subject = subject_line(interrupt, event)
        with get_connection() as connection:
            for user in people:
                message = _message(interrupt, user, subject, delegation, connection)
                try:
                    message.send()
                except Exception as exc:
                    failures[str(user.pk)] = f"{user.email}: {type(exc).__name__}: {exc}"
        if failures:
            raise Undelivered("; ".join(failures.values()), only=list(failures))


def _message(
    interrupt: Interrupt, user: Any, subject: str, delegation: Delegation | None, connection: Any
) -> EmailMessage:
    links = decision_urls(interrupt, user.pk)
    context = {
        "interrupt": interrupt,
        "user": user,
        "delegation": delegation,
        "page_url": page_url(interrupt),
        "approve_url": links.get("approve"),
        "reject_url": links.get("reject"),
        "max_age_hours": hitl_settings.EMAIL_LINK_MAX_AGE // 3600,
    }
    body = render_to_string("approvals/email/decision_needed.txt", context)
    return EmailMessage(subject=subject, body=body, to=[user.email], connection=connection)
