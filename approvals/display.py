"""JSON values as people read them: tables of fields, nested values folded (JSON text only
past MAX_DEPTH levels), and the short texts of list cells."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

from workflows.engine.errors import ResponseValidationError
from workflows.engine.values import in_key_order
from workflows.models import Interrupt

# The JSON columns of an interrupt that people read in the order the workflow gave.
ORDERED_COLUMNS = ("payload", "response_schema", "on_timeout")
# Values nested deeper than this show as one line of JSON cut to FOLDED_CHARS: a page
# never recurses as deep as a value may go.
MAX_DEPTH = 20
FOLDED_CHARS = 200


def _scalar(value: Any) -> SafeString:
    if value is None:
        return mark_safe('<span class="quiet">none</span>')
    if isinstance(value, bool):
        return format_html('<span class="bool">{}</span>', "yes" if value else "no")
    return format_html("{}", value)


def _folded(value: dict | list, depth: int) -> SafeString:
    size = f"{len(value)} field(s)" if isinstance(value, dict) else f"{len(value)} item(s)"
    return format_html(
        "<details><summary>{}</summary>{}</details>", size, render_value(value, depth)
    )


def _cell(value: Any, depth: int) -> SafeString:
    if isinstance(value, dict | list) and value:
        return _folded(value, depth)
    if isinstance(value, dict | list):
        return mark_safe('<span class="quiet">empty</span>')
    return _scalar(value)


def render_value(value: Any, depth: int = 0) -> SafeString:
    """A dict as a two-column table, a list as a numbered list; nested dicts and lists
    inside them are folded under <details>, MAX_DEPTH levels deep, then shown as JSON."""
    if isinstance(value, dict | list) and depth >= MAX_DEPTH:
        return format_html('<code class="hitl-deep">{}</code>', compact_json(value))
    if isinstance(value, dict):
        cells = ((key, _cell(item, depth + 1)) for key, item in value.items())
        rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", cells)
        return format_html('<table class="hitl-value">{}</table>', rows)
    if isinstance(value, list):
        items = format_html_join("", "<li>{}</li>", ((_cell(v, depth + 1),) for v in value))
        return format_html('<ol class="hitl-value">{}</ol>', items)
    return _scalar(value)


class _Text(str):
    """Punctuation or a key of a text being written, as opposed to a value to write."""


_DONE = object()


def _pieces(
    value: Any, parts: Callable[[Any], Iterator[Any]], scalar: Callable[[Any], str]
) -> Iterator[str]:
    """The text of `value` piece by piece, without recursion: `parts(container)` yields a
    dict's or a list's pieces (_Text and the values in it), `scalar` writes the rest."""
    stack = [iter((value,))]
    while stack:
        piece = next(stack[-1], _DONE)
        if piece is _DONE:
            stack.pop()
        elif isinstance(piece, _Text):
            yield piece
        elif isinstance(piece, dict | list):
            stack.append(parts(piece))
        else:
            yield scalar(piece)


def _clipped(pieces: Iterator[str], limit: int) -> str:
    """The text the pieces make, cut to `limit` characters (reading no more than that)."""
    text, size = [], 0
    for piece in pieces:
        text.append(piece)
        size += len(piece)
        if size > limit:
            break
    joined = "".join(text)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def _json_parts(value: dict | list) -> Iterator[Any]:
    if isinstance(value, dict):
        yield _Text("{")
        for index, (key, item) in enumerate(value.items()):
            yield _Text(f"{', ' if index else ''}{json.dumps(str(key), ensure_ascii=False)}: ")
            yield item
        yield _Text("}")
    else:
        yield _Text("[")
        for index, item in enumerate(value):
            if index:
                yield _Text(", ")
            yield item
        yield _Text("]")


def _json_scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def compact_json(value: Any, limit: int = FOLDED_CHARS) -> str:
    """`value` as one line of JSON, at most `limit` characters, however deep it is."""
    return _clipped(_pieces(value, _json_parts, _json_scalar), limit)


def _line_parts(value: dict | list) -> Iterator[Any]:
    if isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            yield _Text(f"{', ' if index else ''}{key}: ")
            yield item
    else:
        for index, item in enumerate(value):
            if index:
                yield _Text(", ")
            yield item


def _line_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "none" if value is None else str(value)


def one_line(value: Any, limit: int = 80) -> str:
    """A short text for a list cell: `approved: no, comment: late`."""
    return _clipped(_pieces(value, _line_parts, _line_scalar), limit)


def answer_cell(response: Any) -> SafeString:
    """A decision's answer in a table: "approved" or "rejected" for a yes/no (the comment
    has a column of its own), then whatever else it holds, as fields."""
    approved = response.get("approved") if isinstance(response, dict) else None
    if not isinstance(approved, bool):
        return render_value(response)
    rest = {k: v for k, v in response.items() if k not in ("approved", "comment")}
    word = "approved" if approved else "rejected"
    return format_html("{}{}", word, render_value(rest) if rest else "")


def in_declared_order(interrupt: Interrupt) -> Interrupt:
    """`interrupt` with the objects in its payload, response_schema and on_timeout in the
    key order the workflow declared, for the fields, tables and texts made of them.
    PostgreSQL's jsonb re-sorts object keys; the store writes `key_order` beside them (a
    row without it keeps the stored order). Columns left out of the query stay unloaded."""
    orders = interrupt.key_order or {}
    deferred = interrupt.get_deferred_fields()
    for column in ORDERED_COLUMNS:
        if column in orders and column not in deferred:
            setattr(interrupt, column, in_key_order(getattr(interrupt, column), orders[column]))
    return interrupt


def waited(since: datetime) -> str:
    return timesince(since, timezone.now(), depth=1)


def countdown(deadline: datetime | None) -> SafeString:
    """The deadline as a <time> the page's script counts down; the text works without it."""
    if deadline is None:
        return mark_safe('<span class="quiet">no deadline</span>')
    return _relative_time(deadline, "hitl-deadline", "in", depth=2)


def _relative_time(when: datetime, css_class: str, ahead: str, *, depth: int) -> SafeString:
    """A <time> saying how far `when` is ("<ahead> 3 hours"), or "overdue by 2 hours" with
    the class `overdue` once it has passed."""
    now = timezone.now()
    if when > now:
        text, overdue = f"{ahead} {timeuntil(when, now, depth=depth)}", ""
    else:
        text, overdue = f"overdue by {timesince(when, now, depth=depth)}", " overdue"
    return format_html(
        '<time class="{}{}" datetime="{}">{}</time>', css_class, overdue, when.isoformat(), text
    )


def priority_badge(priority: str) -> SafeString:
    """The priority as a coloured badge (the colour is a hint: the word is always there)."""
    return format_html('<span class="hitl-priority hitl-priority-{}">{}</span>', priority, priority)


def due_target(due_at: datetime | None) -> SafeString:
    """The due date (a target, not the deadline): "due in 3 hours", or "overdue by 2 hours"
    in red; nothing when there is none."""
    if due_at is None:
        return mark_safe("")
    return _relative_time(due_at, "hitl-due", "due in", depth=1)


def due_badge(due_at: datetime | None) -> SafeString:
    """The due target on a line of its own, above the deadline in the inbox's cell."""
    return format_html("{}<br>", due_target(due_at)) if due_at else mark_safe("")


def timeout_policy(on_timeout: Any, *, brief: bool = False) -> SafeString:
    """What happens (or happened) when the deadline passes; `brief` for a list cell."""
    if on_timeout is None:
        return mark_safe("the invocation fails")
    response = on_timeout.get("response") if isinstance(on_timeout, dict) else on_timeout
    if brief:
        return format_html("answered with “{}”", one_line(response))
    return format_html("answered with {}", render_value(response))


def timeout_summary(on_timeout: Any) -> SafeString:
    """The timeout policy in a word or two for a list cell ("rejected", "a default
    answer"); the whole answer shows on hover and on the decision page."""
    if on_timeout is None:
        return timeout_policy(None)
    response = on_timeout.get("response") if isinstance(on_timeout, dict) else on_timeout
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
