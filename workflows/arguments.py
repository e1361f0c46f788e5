"""What callers pass to the write path, checked before anything is stored or looked up: a
submission is a list of function responses, each a FunctionResponse or a dict; a
reassignment names users and groups that exist and can reach the question's quorum; an
interrupt id is one a row can have. A wrong value raises ResponseValidationError saying
what was passed and what is wanted."""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from .conf import hitl_settings
from .engine.errors import ResponseValidationError, UnknownInterruptError, ValueEncodingError
from .engine.events import FunctionResponse, RequestInput
from .engine.principals import parse_assignee
from .engine.transitions import checked_answer
from .engine.values import MAX_INTERRUPT_ID_LENGTH, check_text, is_possible_id
from .models import Interrupt
from .principals import unreachable_quorum

FUNCTION_RESPONSE_SHAPE = (
    'a FunctionResponse or a dict {"id": <interrupt id>, "name": <node name>, "response": ...}'
)
FUNCTION_RESPONSE_KEYS = {"id", "name", "response"}
ASSIGNEES_SHAPE = 'a list of "user:<username>" and "group:<name>" strings'
_MISSING = object()

# Short and safe for any value (a deeply nested one included): reprlib cuts both.
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 80


def _described(value: Any) -> str:
    """What a caller passed, for an error message: its type and a short repr."""
    return f"{type(value).__name__} {_short.repr(value)}"


def _checked_text(
    interrupt_id: str | None, text: str, field: str, max_length: int | None = None
) -> str:
    try:
        return check_text(text, field, max_length)
    except ValueEncodingError as exc:
        raise ResponseValidationError(interrupt_id, field, exc.reason) from None


def checked_interrupt_id(interrupt_id: Any) -> str:
    """`interrupt_id` when an interrupt can have it; UnknownInterruptError before any query
    for one no interrupt can have (the database might refuse even to compare it)."""
    if not is_possible_id(interrupt_id):
        raise UnknownInterruptError(interrupt_id)
    return interrupt_id


def checked_decision(interrupt_id: str, response: Any, comment: Any) -> tuple[Any, str]:
    """A person's decision as it will be stored: the answer unwrapped and checked as every
    answer is (null is none: a decision records an answer), the comment as text every
    database can keep."""
    value = checked_answer(
        interrupt_id, response, hitl_settings.MAX_RESPONSE_BYTES, hitl_settings.MAX_VALUE_DEPTH
    )
    if value is None:
        raise ResponseValidationError(interrupt_id, "response", "a decision needs an answer")
    if not isinstance(comment, str):
        raise ResponseValidationError(
            interrupt_id, "comment", f"wants a string; got {_described(comment)}"
        )
    return value, _checked_text(interrupt_id, comment, "comment")


def _as_function_response(value: Any, index: int = 0) -> FunctionResponse:
    field = f"function_responses[{index}]"
    if isinstance(value, FunctionResponse):
        return _checked_function_response(value.id, value.name, value.response, field)
    if isinstance(value, Mapping):
        unexpected = sorted(set(value) - FUNCTION_RESPONSE_KEYS, key=str)
        if unexpected:
            raise ResponseValidationError(
                None,
                field,
                f"unexpected keys {unexpected}: a function response has only "
                f'"id", "name" and "response" (put the answer under "response")',
            )
        return _checked_function_response(
            value.get("id"), value.get("name"), value.get("response", _MISSING), field
        )
    hint = ""
    if isinstance(value, Interrupt):
        hint = f'; to answer this interrupt pass {{"id": {value.pk!r}, "response": ...}}'
    elif isinstance(value, UUID):
        hint = "; an invocation id? Answers name the interrupt id (Interrupt.id, a string)"
    raise ResponseValidationError(
        None, field, f"got {_described(value)}; wants {FUNCTION_RESPONSE_SHAPE}{hint}"
    )


def _checked_function_response(
    interrupt_id: Any, name: Any, response: Any, field: str
) -> FunctionResponse:
    """Id and name as every database can keep and compare them (PostgreSQL refuses a NUL
    character even in a lookup); the answer is checked against its interrupt later."""
    if not isinstance(interrupt_id, str) or not interrupt_id:
        raise ResponseValidationError(
            None,
            f"{field}.id",
            f"needs the interrupt id, a non-empty string; got {_described(interrupt_id)}",
        )
    if response is _MISSING:
        raise ResponseValidationError(None, f"{field}.response", "the answer is missing")
    if name is not None and not isinstance(name, str):
        raise ResponseValidationError(
            None, f"{field}.name", f"wants a string (or none); got {_described(name)}"
        )
    interrupt_id = _checked_text(None, interrupt_id, f"{field}.id", MAX_INTERRUPT_ID_LENGTH)
    name = _checked_text(None, name or "", f"{field}.name")
    return FunctionResponse(interrupt_id, name, response)


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

    if isinstance(assignees, str) or not isinstance(assignees, list | tuple):
        raise ResponseValidationError(
            interrupt.pk, "assignees", f"must be {ASSIGNEES_SHAPE}; got {_described(assignees)}"
        )
    for index, assignee in enumerate(assignees):
        if not isinstance(assignee, str):
            raise ResponseValidationError(
                interrupt.pk,
                f"assignees[{index}]",
                f"wants a string; got {_described(assignee)}",
            )
        # Before the names are looked up: PostgreSQL refuses a NUL even in a comparison.
        _checked_text(interrupt.pk, assignee, f"assignees[{index}]")
    try:
        request = RequestInput(
            response_schema=interrupt.response_schema,
            assignees=list(assignees),
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
    # Whoever decided, and whoever a delegate decided for, has no vote left.
    decided = list(interrupt.decisions.values_list("actor_id", "on_behalf_of_id"))
    voted = [pk for pair in decided for pk in pair if pk is not None]
    starter = [interrupt.invocation.started_by_id] if interrupt.four_eyes else []
    problem = unreachable_quorum(
        request.assignees, interrupt.quorum, approvals=len(decided), excluded=voted + starter
    )
    if problem:
        raise ResponseValidationError(interrupt.pk, "assignees", problem)
    return request.assignees
