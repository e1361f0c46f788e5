"""Answers that arrive over MCP: an elicitation's `accept`, `decline` or `cancel`, and the
`answer_question` tool. Each is the authenticated user's decision through `services.decide`,
under every rule of the question; this module has none of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import close_old_connections, transaction
from mcp_types import ElicitResult
from pydantic import ValidationError

from ... import services
from ...models import Interrupt
from . import state
from .errors import as_refusal, refusal

DECLINED = "Declined in the MCP client"


def _elicit_result(key: str, value: Any) -> ElicitResult:
    if isinstance(value, ElicitResult):
        return value
    try:
        return ElicitResult.model_validate(
            value.model_dump(by_alias=True) if hasattr(value, "model_dump") else value
        )
    except ValidationError:
        raise refusal(
            "invalid_response", f"inputResponses[{key}] is not an elicitation result"
        ) from None


def _decline(interrupt_id: str, result: ElicitResult, user: Any) -> None:
    """A rejection where the question is a yes/no one (its schema has `approved`); a
    question without one has no answer that means no, so declining it is refused."""
    schema = (
        Interrupt.objects.filter(pk=interrupt_id).values_list("response_schema", flat=True).first()
    )
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or "approved" not in properties:
        raise refusal(
            "decline_not_an_answer",
            f"question {interrupt_id} has no yes/no answer: accept with its form, or cancel",
        )
    content = result.content or {}
    reason = content.get("reason") or content.get("comment") or DECLINED
    services.decide(interrupt_id, {"approved": False}, actor=user, comment=str(reason))


def apply(responses: Mapping[str, Any], user: Any) -> list[str]:
    """Record the elicitation results, keyed by question id, in the caller's transaction;
    returns the ids of the questions left open (cancelled)."""
    left_open = []
    for key, value in responses.items():
        result = _elicit_result(key, value)
        if result.action == "accept":
            services.decide(key, dict(result.content or {}), actor=user)
        elif result.action == "decline":
            _decline(key, result, user)
        else:
            left_open.append(key)
    return left_open


def answer_round(
    plaintext_state: str, responses: Mapping[str, Any], user: Any
) -> tuple[str, list[str]]:
    """A retried call's inputResponses against its verified requestState, in one
    transaction: the state is taken and every answer recorded, or nothing is. Returns the
    invocation id and the questions left open."""
    close_old_connections()
    found = state.read(plaintext_state, user)
    unasked = set(responses) - set(found.question_ids)
    if not responses or unasked:
        raise refusal(
            "invalid_input_responses",
            "inputResponses must answer the questions this requestState asked: "
            + ", ".join(found.question_ids),
        )
    with transaction.atomic():
        state.take(found)
        left_open = refused_as_protocol_error(apply, responses, user)
    return found.invocation_id, left_open


def answer_question(question_id: str, response: Any, comment: str, user: Any) -> str:
    """The `answer_question` tool: `user`'s decision; returns the invocation id."""
    close_old_connections()
    decision = refused_as_protocol_error(
        services.decide, question_id, response, actor=user, comment=comment
    )
    return str(decision.interrupt.invocation_id)


def update_task(invocation_id: str, responses: Mapping[str, Any], user: Any) -> None:
    """tasks/update: answers to the task's questions, in one transaction."""
    close_old_connections()
    others = Interrupt.objects.filter(pk__in=list(responses)).exclude(invocation_id=invocation_id)
    if not responses or others.exists():
        raise refusal("invalid_input_responses", "inputResponses must answer this task's questions")
    with transaction.atomic():
        refused_as_protocol_error(apply, responses, user)


def refused_as_protocol_error(func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as exc:
        error = as_refusal(exc)
        if error is None:
            raise
        raise error from exc
