"""What callers pass to the write path, checked before anything is stored: a submission
is a list of function responses, each a FunctionResponse or a dict; a reassignment names
users and groups that exist and can reach the question's quorum. A wrong value raises
ResponseValidationError saying what was passed and what is wanted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from .engine.errors import ResponseValidationError
from .engine.events import FunctionResponse, RequestInput, parse_assignee
from .models import Interrupt
from .policy import unreachable_quorum

FUNCTION_RESPONSE_SHAPE = (
    'a FunctionResponse or a dict {"id": <interrupt id>, "name": <node name>, "response": ...}'
)
FUNCTION_RESPONSE_KEYS = {"id", "name", "response"}


def _described(value: Any) -> str:
    """What a caller passed, for an error message: its type and a short repr."""
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{type(value).__name__} {shown}"


def _as_function_response(value: Any, index: int = 0) -> FunctionResponse:
    field = f"function_responses[{index}]"
    if isinstance(value, FunctionResponse):
        return value
    if isinstance(value, Mapping):
        unexpected = sorted(set(value) - FUNCTION_RESPONSE_KEYS, key=str)
        if unexpected:
            raise ResponseValidationError(
                None,
                field,
                f"unexpected keys {unexpected}: a function response has only "
                f'"id", "name" and "response" (put the answer under "response")',
            )
        if not isinstance(value.get("id"), str) or not value["id"]:
            raise ResponseValidationError(
                None,
                f"{field}.id",
                f"needs the interrupt id, a non-empty string; got {_described(value.get('id'))}",
            )
        if "response" not in value:
            raise ResponseValidationError(None, f"{field}.response", "the answer is missing")
        return FunctionResponse(value["id"], str(value.get("name") or ""), value["response"])
    hint = ""
    if isinstance(value, Interrupt):
        hint = f'; to answer this interrupt pass {{"id": {value.pk!r}, "response": ...}}'
    elif isinstance(value, UUID):
        hint = "; an invocation id? Answers name the interrupt id (Interrupt.id, a string)"
    raise ResponseValidationError(
        None, field, f"got {_described(value)}; wants {FUNCTION_RESPONSE_SHAPE}{hint}"
    )


def function_response_list(responses: Any) -> list[FunctionResponse]:
    """The submission as a list of FunctionResponses; a clear error for a wrong shape."""
    if isinstance(responses, Mapping | FunctionResponse | str | bytes) or not isinstance(
        responses, Iterable
    ):
        raise ResponseValidationError(
            None,
            "function_responses",
            f"wants a list of function responses, each {FUNCTION_RESPONSE_SHAPE}; "
            f"got {_described(responses)}"
            + ("; wrap it in a list" if isinstance(responses, Mapping | FunctionResponse) else ""),
        )
    return [_as_function_response(value, index) for index, value in enumerate(responses)]


def checked_assignees(interrupt: Interrupt, assignees: Any) -> list[str]:
    """`assignees` (each principal once) if RequestInput accepts them with this interrupt's
    schema and quorum (a stored question must load again), every user and group they name
    exists, and they can still reach the quorum with the decisions recorded so far."""
    try:
        request = RequestInput(
            response_schema=interrupt.response_schema,
            assignees=assignees,
            quorum=interrupt.quorum,
        )
    except ValueError as exc:
        raise ResponseValidationError(interrupt.pk, "assignees", str(exc)) from None
    named: dict[str, set[str]] = {"user": set(), "group": set()}
    for kind, name in map(parse_assignee, request.assignees):
        named[kind].add(name)
    users = get_user_model()
    username = users.USERNAME_FIELD
    found = {
        "user": set(
            users.objects.filter(**{f"{username}__in": named["user"]}).values_list(
                username, flat=True
            )
        ),
        "group": set(Group.objects.filter(name__in=named["group"]).values_list("name", flat=True)),
    }
    missing = [f"{kind}:{name}" for kind in named for name in sorted(named[kind] - found[kind])]
    if missing:
        raise ResponseValidationError(interrupt.pk, "assignees", f"no such {', '.join(missing)}")
    decided = list(interrupt.decisions.values_list("actor_id", flat=True))
    starter = [interrupt.invocation.started_by_id] if interrupt.four_eyes else []
    problem = unreachable_quorum(
        request.assignees, interrupt.quorum, approvals=len(decided), excluded=decided + starter
    )
    if problem:
        raise ResponseValidationError(interrupt.pk, "assignees", problem)
    return request.assignees
