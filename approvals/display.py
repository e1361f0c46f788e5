"""JSON values as people read them: tables of fields, nested values folded, never raw JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

from workflows.engine.errors import ResponseValidationError


def _scalar(value: Any) -> SafeString:
    if value is None:
        return mark_safe('<span class="quiet">none</span>')
    if isinstance(value, bool):
        return format_html('<span class="bool">{}</span>', "yes" if value else "no")
    return format_html("{}", value)


def _folded(value: dict | list) -> SafeString:
    size = f"{len(value)} field(s)" if isinstance(value, dict) else f"{len(value)} item(s)"
    return format_html("<details><summary>{}</summary>{}</details>", size, render_value(value))


def _cell(value: Any) -> SafeString:
    if isinstance(value, dict | list) and value:
        return _folded(value)
    if isinstance(value, dict | list):
        return mark_safe('<span class="quiet">empty</span>')
    return _scalar(value)


def render_value(value: Any) -> SafeString:
    """A dict as a two-column table, a list as a numbered list; nested dicts and lists
    inside them are folded under <details>."""
    if isinstance(value, dict):
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, _cell(v)) for k, v in value.items())
        )
        return format_html('<table class="hitl-value">{}</table>', rows)
    if isinstance(value, list):
        items = format_html_join("", "<li>{}</li>", ((_cell(v),) for v in value))
        return format_html('<ol class="hitl-value">{}</ol>', items)
    return _scalar(value)


def waited(since: datetime) -> str:
    return timesince(since, timezone.now(), depth=1)


def countdown(deadline: datetime | None) -> SafeString:
    """The deadline as a <time> the page's script counts down; the text works without it."""
    if deadline is None:
        return mark_safe('<span class="quiet">no deadline</span>')
    now = timezone.now()
    if deadline > now:
        text, overdue = f"in {timeuntil(deadline, now, depth=2)}", ""
    else:
        text, overdue = f"overdue by {timesince(deadline, now, depth=2)}", " overdue"
    return format_html(
        '<time class="hitl-deadline{}" datetime="{}">{}</time>', overdue, deadline.isoformat(), text
    )


def one_line(value: Any, limit: int = 80) -> str:
    """A short text for a list cell: `approved: no, comment: late`."""
    if isinstance(value, dict):
        text = ", ".join(f"{k}: {one_line(v, limit)}" for k, v in value.items())
    elif isinstance(value, list):
        text = ", ".join(one_line(v, limit) for v in value)
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    else:
        text = "none" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def timeout_policy(on_timeout: Any, *, brief: bool = False) -> SafeString:
    """What happens (or happened) when the deadline passes; `brief` for a list cell."""
    if on_timeout is None:
        return mark_safe("the invocation fails")
    response = on_timeout.get("response")
    if brief:
        return format_html("answered with “{}”", one_line(response))
    return format_html("answered with {}", render_value(response))


def timeout_summary(on_timeout: Any) -> SafeString:
    """The timeout policy in a word or two for a list cell ("rejected", "a default
    answer"); the whole answer shows on hover and on the decision page."""
    if on_timeout is None:
        return timeout_policy(None)
    response = on_timeout.get("response")
    approved = response.get("approved") if isinstance(response, dict) else None
    if isinstance(approved, bool):
        words = "approved" if approved else "rejected"
    else:
        words = "a default answer"
    return format_html('<span title="{}">{}</span>', timeout_policy(on_timeout, brief=True), words)


def refusal_message(exc: Exception) -> str:
    """What a person is told when the service refuses their decision."""
    code = getattr(exc, "code", "")
    if code == "interrupt_not_pending":
        return f"Too late: {exc}. Nothing was recorded."
    if code == "already_decided":
        return "You already decided on this question; one decision per person."
    if code in ("signature_required", "invalid_signature", "no_passkey"):
        return f"Not recorded: {exc}."
    if isinstance(exc, PermissionDenied):
        return f"You may not answer this question: {exc}"
    if isinstance(exc, ResponseValidationError):  # its text starts with the interrupt's id
        return f"Refused: {exc.message}. Nothing was changed."
    return str(exc)
