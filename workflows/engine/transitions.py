"""State changes requested from outside a run: accept answers, cancel, retry.

Pure functions from what is stored to the WriteBatch that records the change; the async
Runner and the Django services both apply them, so the rules live in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from .errors import (
    InputValidationError,
    InterruptNotPendingError,
    InterruptSupersededError,
    InvocationStateError,
    MultipleInvocationsError,
    PayloadTooLargeError,
    ResponseValidationError,
    UnknownInterruptError,
    ValueEncodingError,
)
from .events import DefaultResponse, Event, FunctionResponse
from .schema import unwrap_response, validate_response
from .state import Checkpoint, InterruptRecord, Resolution, WriteBatch
from .status import InterruptStatus, NodeStatus
from .values import to_json_value


@dataclass
class Acceptance:
    invocation_id: str
    batch: WriteBatch
    accepted: dict[str, Any]  # interrupt id -> unwrapped answer; empty for a pure repeat


def same_answer(a: Any, b: Any) -> bool:
    """Strict JSON equality: True is not 1, "1" is not 1."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def checked_input(
    node_input: Any, max_bytes: int | None = None, max_depth: int | None = None
) -> Any:
    """An invocation's input as it will be stored, or InputValidationError /
    PayloadTooLargeError."""
    try:
        return to_json_value(node_input, "input", max_bytes, max_depth)
    except ValueEncodingError as exc:
        error = PayloadTooLargeError if exc.too_large else InputValidationError
        raise error("input", exc.reason) from None


def checked_answer(
    interrupt_id: str | None,
    response: Any,
    max_bytes: int | None = None,
    max_depth: int | None = None,
    field: str = "response",
) -> Any:
    """An answer as it will be stored: unwrapped (`{"result": ...}`, a JSON string there
    parsed), then checked, so what is validated and kept is what was parsed. Else
    ResponseValidationError / PayloadTooLargeError naming `field`."""
    try:
        return to_json_value(unwrap_response(response), field, max_bytes, max_depth)
    except ValueEncodingError as exc:
        if exc.too_large:
            raise PayloadTooLargeError(field, exc.reason) from None
        raise ResponseValidationError(interrupt_id, field, exc.reason) from None


def accept_responses(
    responses: list[FunctionResponse],
    interrupts: dict[str, InterruptRecord],
    *,
    actor: str | None = None,
    workflow_name: str | None = None,
    now: datetime | None = None,
    max_bytes: int | None = None,
    max_depth: int | None = None,
) -> Acceptance:
    """Validate a submission against the stored interrupts; raise a named error or return
    the batch that records it (user events, resolutions). Nothing is written here."""
    if not responses:
        raise ResponseValidationError(None, "function_responses", "at least one is required")
    answers: dict[str, Any] = {}
    names: dict[str, str] = {}
    for index, response in enumerate(responses):
        record = interrupts.get(response.id)
        if record is None or (workflow_name and record.workflow_name != workflow_name):
            raise UnknownInterruptError(response.id)
        field = f"function_responses[{index}].response"
        value = checked_answer(response.id, response.response, max_bytes, max_depth, field)
        if response.id in answers and not same_answer(answers[response.id], value):
            raise ResponseValidationError(
                response.id, "response", "two different answers in one submission"
            )
        answers[response.id] = value
        names[response.id] = response.name
    invocation_ids = {interrupts[i].invocation_id for i in answers}
    if len(invocation_ids) > 1:
        raise MultipleInvocationsError(list(invocation_ids))
    (invocation_id,) = invocation_ids

    accepted: dict[str, Any] = {}
    for interrupt_id, value in answers.items():
        record = interrupts[interrupt_id]
        if record.status == InterruptStatus.PENDING:
            validate_response(interrupt_id, record.request.response_schema, value)
            accepted[interrupt_id] = value
        elif record.status == InterruptStatus.RESOLVED:
            if not same_answer(record.response, value):
                raise InterruptNotPendingError(
                    interrupt_id, record.status, "it was already answered differently"
                )
        elif record.status == InterruptStatus.SUPERSEDED:
            raise InterruptSupersededError(interrupt_id)
        else:
            raise InterruptNotPendingError(interrupt_id, record.status)

    batch = WriteBatch(invocation_id)
    for interrupt_id, value in accepted.items():
        record = interrupts[interrupt_id]
        batch.events.append(
            Event(
                author="user",
                invocation_id=invocation_id,
                path=record.path,
                run_id=record.run_id,
                function_responses=[FunctionResponse(interrupt_id, names[interrupt_id], value)],
            )
        )
        batch.resolutions.append(
            Resolution(interrupt_id, InterruptStatus.RESOLVED, value, actor, now)
        )
    return Acceptance(invocation_id, batch, accepted)


def cancel_batch(
    checkpoint: Checkpoint, *, actor: str | None = None, now: datetime | None = None
) -> WriteBatch:
    """Cancel every unfinished node run and pending interrupt, and the invocation."""
    invocation = checkpoint.invocation
    if invocation.status in (NodeStatus.COMPLETED, NodeStatus.CANCELLED):
        raise InvocationStateError(invocation.id, invocation.status, "cancel")
    batch = WriteBatch(invocation.id, invocation=replace(invocation, status=NodeStatus.CANCELLED))
    for path, state in checkpoint.node_runs.items():
        if not state.status.is_final:
            batch.node_runs[path] = replace(state, status=NodeStatus.CANCELLED, interrupt_ids=set())
            batch.events.append(
                Event(
                    author=state.name,
                    invocation_id=invocation.id,
                    path=path,
                    run_id=state.run_id,
                    output=state.output,
                    route=state.route,
                    status=NodeStatus.CANCELLED,
                )
            )
    for record in checkpoint.interrupts.values():
        if record.status == InterruptStatus.PENDING:
            batch.resolutions.append(
                Resolution(record.id, InterruptStatus.CANCELLED, actor=actor, at=now)
            )
    return batch


def retry_batch(checkpoint: Checkpoint) -> WriteBatch:
    """Reopen a FAILED invocation; the next drive re-runs its failed node runs."""
    invocation = checkpoint.invocation
    if invocation.status != NodeStatus.FAILED:
        raise InvocationStateError(invocation.id, invocation.status, "retry")
    reopened = replace(invocation, status=NodeStatus.PENDING, error=None)
    return WriteBatch(invocation.id, invocation=reopened)


def expire_batch(checkpoint: Checkpoint, interrupt_id: str, now: datetime) -> WriteBatch:
    """Apply an overdue interrupt's timeout policy: answer it with its DefaultResponse, or
    fail the waiting node (and so the invocation); a retry then asks again."""
    invocation = checkpoint.invocation
    record = checkpoint.interrupts[interrupt_id]
    batch = WriteBatch(invocation.id)
    policy = record.request.on_timeout
    if isinstance(policy, DefaultResponse):
        batch.resolutions.append(
            Resolution(interrupt_id, InterruptStatus.EXPIRED, policy.response, at=now)
        )
        batch.events.append(
            Event(
                author="timeout",
                invocation_id=invocation.id,
                path=record.path,
                run_id=record.run_id,
                function_responses=[FunctionResponse(interrupt_id, "timeout", policy.response)],
            )
        )
        return batch
    error = f"interrupt {interrupt_id!r} expired at its deadline"
    batch.resolutions.append(Resolution(interrupt_id, InterruptStatus.EXPIRED, at=now))
    batch.consumed.add(interrupt_id)  # no answer to apply: a retry asks again
    waiting = checkpoint.node_runs.get(record.path)
    if invocation.status.is_final or waiting is None or waiting.status.is_final:
        return batch
    batch.node_runs[record.path] = replace(waiting, status=NodeStatus.FAILED, error=error)
    batch.events.append(
        Event(
            author=waiting.name,
            invocation_id=invocation.id,
            path=record.path,
            run_id=record.run_id,
            error=error,
            status=NodeStatus.FAILED,
        )
    )
    ancestor = waiting.parent_path
    while ancestor:
        state = checkpoint.node_runs[ancestor]
        batch.node_runs[ancestor] = replace(state, status=NodeStatus.FAILED, error=None)
        ancestor = state.parent_path
    batch.invocation = replace(invocation, status=NodeStatus.FAILED, error=error)
    return batch
