"""One question, as every protocol adapter shows it (DESIGN 4.5, "The envelope")."""

from __future__ import annotations

from typing import Any

from django.apps import apps

from workflows.admin.display import decision_url
from workflows.conf import hitl_settings
from workflows.engine import InterruptStatus
from workflows.engine.questions import is_effect_question, is_gate_question
from workflows.models import Interrupt
from workflows.policy import answer_policy
from workflows.services.grants import action_fingerprint


def question_kind(interrupt: Interrupt) -> str:
    """`gate` (an approval gate's question), `in_doubt` (whether an effect happened),
    `tool_call` (a long-running FunctionCall: payload `{"name", "args"}`, no form of its
    own) or `input` (a RequestInput)."""
    if is_gate_question(interrupt.pk):
        return "gate"
    if is_effect_question(interrupt.pk):
        return "in_doubt"
    payload = interrupt.payload
    if (
        isinstance(payload, dict)
        and set(payload) == {"name", "args"}
        and not interrupt.message
        and interrupt.response_schema is None
    ):
        return "tool_call"
    return "input"


def answerable(interrupt: Interrupt, user: Any) -> bool:
    """Whether `user` may answer the question now: it is pending, the answer rule lets
    them, and they have not decided on it yet."""
    if interrupt.status != InterruptStatus.PENDING:
        return False
    # The policy itself: Django's has_perm says yes to any superuser, whom the answer rule
    # still binds to the assignees.
    if not answer_policy().can_answer(user, interrupt):
        return False
    return not any(d.actor_id == user.pk for d in interrupt.decisions.all())


def needs(interrupt: Interrupt) -> list[str]:
    """What one person's answer cannot carry alone over a channel: the votes of a quorum
    (`decisions`) and a passkey's signature (`signature`)."""
    missing = []
    if interrupt.quorum > 1:
        missing.append("decisions")
    if interrupt.require_signature:
        missing.append("signature")
    return missing


def links(interrupt: Interrupt, user: Any) -> dict[str, str]:
    """The decision page, and the signed one-click links where e-mail links apply."""
    base = hitl_settings.EMAIL_BASE_URL.rstrip("/")
    page = decision_url(interrupt.pk)
    found = {"page": base + page} if page else {}
    if apps.is_installed("approvals") and interrupt.status == InterruptStatus.PENDING:
        from approvals.links import decision_urls  # the inbox app sits above this one

        found.update(decision_urls(interrupt, user.pk))
    return found


def envelope(interrupt: Interrupt, user: Any) -> dict[str, Any]:
    """The question as `user` sees it: the fields every adapter renders from."""
    kind = question_kind(interrupt)
    payload = interrupt.payload
    return {
        "id": interrupt.pk,
        "kind": kind,
        "message": interrupt.message,
        "payload": payload,
        "response_schema": interrupt.response_schema,
        "expires_at": interrupt.deadline,
        "due_at": interrupt.due_at,
        "priority": interrupt.priority,
        "answerable": answerable(interrupt, user),
        "needs": needs(interrupt),
        "tool_call_id": interrupt.pk if kind in ("tool_call", "gate") else None,
        "action_fingerprint": action_fingerprint(payload) if kind == "gate" else None,
        "links": links(interrupt, user),
    }
