"""What the Slack notifier's messages say, in Block Kit: the question, its facts (priority,
due date, who it is for, what just happened) and link buttons to approve, reject or open
it. The approve/reject buttons are the e-mail's signed links (approvals.links)."""

from __future__ import annotations

import re
from typing import Any

from workflows.engine.status import InterruptStatus
from workflows.models import Delegation, Interrupt
from workflows.notifications import DELEGATED, ESCALATED, REMINDED, SUPERSEDED

from ..links import decision_urls, page_url
from .email import subject_line

SECTION_CHARS = 2900  # Slack refuses a section text over 3,000 characters
TITLES = {
    InterruptStatus.PENDING: "Decision needed",
    InterruptStatus.RESOLVED: "Decided",
    InterruptStatus.EXPIRED: "Expired without an answer",
    InterruptStatus.CANCELLED: "Cancelled",
}
NEWS = {
    REMINDED: "Reminder: this still waits for a decision",
    ESCALATED: "Escalated",
    SUPERSEDED: "Superseded: an earlier answer was changed, this question no longer counts",
}


def escape(text: str) -> str:
    """Text as Slack shows it literally: it reads &, < and > as markup (`<!channel>` calls
    everyone, `<https://x|Approve>` is a link) in mrkdwn and in a message's `text`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(escaped: str, limit: int) -> str:
    """Escaped text cut to at most `limit` characters, never inside an "&amp;"."""
    return re.sub(r"&[a-z]*$", "", escaped[:limit]) if len(escaped) > limit else escaped


def fallback_text(interrupt: Interrupt) -> str:
    """The text notifications and screen readers use instead of the blocks."""
    return escape(subject_line(interrupt))


def slack_date(moment: Any) -> str:
    """A time each reader sees in their own time zone (the UTC text where not shown)."""
    shown = "{date_short_pretty} {time}"
    return f"<!date^{int(moment.timestamp())}^{shown}|{moment:%Y-%m-%d %H:%M} UTC>"


def facts(event: str, interrupt: Interrupt, delegation: Delegation | None) -> list[str]:
    lines = [f"Priority: *{interrupt.priority}*"]
    if interrupt.due_at is not None:
        lines.append(f"Due: {slack_date(interrupt.due_at)}")
    lines.append(f"For: {escape(', '.join(interrupt.assignees) or 'anyone who may answer')}")
    if interrupt.status != InterruptStatus.PENDING:
        who = interrupt.resolved_by.get_username() if interrupt.resolved_by else ""
        if who:
            lines.append(f"By: {escape(who)}")
    elif event == DELEGATED and delegation is not None:
        away = escape(delegation.delegator.get_username())
        lines.append(f"For {away}, who is away until {slack_date(delegation.ends_at)}")
    elif event in NEWS:
        lines.append(NEWS[event])
    return lines


def buttons(interrupt: Interrupt, links: tuple[bool, Any]) -> list[dict[str, Any]]:
    """Approve and reject (when the message carries links: `links` is whether, and for
    which user id, None for anyone who may answer), then open."""
    with_links, user_id = links
    urls = decision_urls(interrupt, user_id) if with_links else {}
    shown = [
        ("approve", "Approve", "primary"),
        ("reject", "Reject", "danger"),
    ]
    elements: list[dict[str, Any]] = [
        {
            "type": "button",
            "action_id": decision,
            "text": {"type": "plain_text", "text": label},
            "style": style,
            "url": urls[decision],
        }
        for decision, label, style in shown
        if decision in urls
    ]
    elements.append(
        {
            "type": "button",
            "action_id": "open",
            "text": {"type": "plain_text", "text": "Open"},
            "url": page_url(interrupt),
        }
    )
    return elements


def blocks(
    event: str, interrupt: Interrupt, links: tuple[bool, Any], delegation: Delegation | None
) -> list[dict[str, Any]]:
    title = TITLES.get(InterruptStatus(interrupt.status), str(interrupt.status))
    question = escape(interrupt.message or interrupt.pk)
    text = f"*{title}* · {escape(interrupt.workflow_name)}\n{question}"
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_CHARS)}},
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": line} for line in facts(event, interrupt, delegation)
            ],
        },
        {"type": "actions", "block_id": "decide", "elements": buttons(interrupt, links)},
    ]
