"""The store's tables as rows: table and column lists, the value codecs, and pure
functions that map rows to the engine's records and records to row values.

The column lists are a second copy of the schema; tests/workflows/test_store_schema.py
holds them to the models: every column named here exists, every column of a table the
store inserts into is written or listed in LEFT_TO_DEFAULTS, and JSON_COLUMNS are the
models' JSONFields."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..engine.events import FAIL_ON_TIMEOUT, Event, FunctionCall, FunctionResponse, RequestInput
from ..engine.state import NOT_LOADED, Checkpoint, InterruptRecord, InvocationRecord, NodeRunState
from ..engine.status import InterruptStatus, NodeStatus
from ..engine.values import key_order
from ..models import Interrupt, Invocation, NodeRun, SessionEvent
from ..querysets import ANSWERED_STATUSES

ANSWERED = ANSWERED_STATUSES  # the statuses of an answered interrupt, one list for all

INVOCATIONS = Invocation._meta.db_table
NODE_RUNS = NodeRun._meta.db_table
EVENTS = SessionEvent._meta.db_table
INTERRUPTS = Interrupt._meta.db_table

# -- what the store writes ---------------------------------------------------------------
# Inserted columns, in the order node_run_values and event_values give the values.
NODE_RUN_COLUMNS = [
    *("invocation_id", "path", "parent_path", "name", "run_id", "status", "input", "output"),
    *("route", "interrupt_ids", "resume_inputs", "attempt", "error", "created_at", "updated_at"),
]
EVENT_COLUMNS = [
    *("invocation_id", "author", "path", "run_id", "status", "output", "route"),
    *("function_calls", "function_responses", "long_running_tool_ids", "error", "timestamp"),
]
# The columns of the tables the store inserts into that it leaves to the database (the
# auto key) or to the model's defaults: a column neither written nor listed here fails
# the schema test, so a new field is a decision made here.
LEFT_TO_DEFAULTS = {
    NODE_RUNS: {"id"},
    EVENTS: {"id"},
    # A new interrupt is pending, unclaimed and unanswered; created_at is auto_now_add.
    INTERRUPTS: {
        *("claimed_by_id", "claimed_at", "response", "consumed", "deferred"),
        *("resolved_by_id", "resolved_at", "created_at", "escalation_step"),
    },
}

# -- what the store reads ----------------------------------------------------------------
INVOCATION_READ = ["id", "workflow_name", "status", "input", "output", "error", "session_id"]
NODE_RUN_READ = [
    *("path", "parent_path", "name", "run_id", "status", "input", "output", "route"),
    *("interrupt_ids", "resume_inputs", "attempt", "error"),
]
INTERRUPT_READ = [
    *("id", "invocation_id", "workflow_name", "path", "run_id", "message", "payload"),
    *("response_schema", "timeout_seconds", "on_timeout", "status", "response", "consumed"),
    *("resolved_by_id", "resolved_at", "deadline", "assignees", "quorum", "four_eyes"),
    *("require_signature", "deferred", "priority", "due_seconds", "escalation"),
]
EVENT_READ = EVENT_COLUMNS

# The JSON columns of each table: written as JSON text, read back as text and decoded.
JSON_COLUMNS = {
    INVOCATIONS: {"input", "output"},
    NODE_RUNS: {"input", "output", "interrupt_ids", "resume_inputs"},
    EVENTS: {"output", "function_calls", "function_responses", "long_running_tool_ids"},
    INTERRUPTS: {
        *("payload", "response_schema", "on_timeout", "response", "assignees", "key_order"),
        "escalation",
    },
}


# -- codecs ------------------------------------------------------------------------------
def dumps(value: Any) -> str:
    return json.dumps(value)


def loads(value: Any) -> Any:
    """A JSON column's value: text on SQLite, and as the store reads it (as text) on
    PostgreSQL; decoded values pass through."""
    return json.loads(value) if isinstance(value, str) else value


def as_uuid(value: Any) -> str:
    return str(uuid.UUID(str(value)))


def aware(value: Any) -> datetime | None:
    """A stored datetime, aware on every backend (SQLite hands back naive ones)."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else parse_datetime(value)
    if parsed is None:
        raise ValueError(f"not a stored datetime: {value!r}")
    if timezone.is_aware(parsed):
        return parsed
    # Naive: UTC with USE_TZ (how Django stores it on SQLite), else the current time zone.
    return timezone.make_aware(parsed, UTC if settings.USE_TZ else None)


def stored_time(value: datetime | None) -> datetime | None:
    """A datetime as the ORM stores it: naive local time without USE_TZ."""
    if value is not None and not settings.USE_TZ and timezone.is_aware(value):
        return timezone.make_naive(value)
    return value


# -- rows to records ---------------------------------------------------------------------
def invocation_record(row: tuple) -> InvocationRecord:
    id_, workflow_name, status, input_, output, error, session_id = row
    return InvocationRecord(
        id=as_uuid(id_),
        workflow_name=workflow_name,
        status=NodeStatus(status),
        input=loads(input_),
        output=loads(output),
        error=error or None,
        session_id=as_uuid(session_id),
    )


def node_run_state(row: tuple, completed_loaded: bool = True) -> tuple[str, NodeRunState]:
    path, parent, name, run_id, status, input_, output, route, ids, resume, attempt, error = row
    left_out = not completed_loaded and status == NodeStatus.COMPLETED
    return path, NodeRunState(
        status=NodeStatus(status),
        run_id=run_id,
        output=NOT_LOADED if left_out else loads(output),
        # Most runs wait on nothing and resumed with nothing: no decoding for those
        # (json.loads costs 11,600 instructions a column, comparing 1,400: docs/performance.md).
        interrupt_ids=set() if ids == "[]" else set(loads(ids)),
        attempt=attempt,
        name=name,
        parent_path=parent,
        input=NOT_LOADED if left_out else loads(input_),
        route=route or None,
        resume_inputs={} if resume == "{}" else dict(loads(resume)),
        error=error or None,
    )


def interrupt_record(row: tuple) -> InterruptRecord:
    id_, invocation_id, workflow_name, path, run_id, message, payload, *rest = row
    response_schema, timeout_seconds, on_timeout, status, response, consumed, *rest = rest
    (
        resolved_by_id,
        resolved_at,
        deadline,
        assignees,
        quorum,
        four_eyes,
        require_signature,
        deferred,
        priority,
        due_seconds,
        escalation,
    ) = rest
    request = {
        "interrupt_id": id_,
        "message": message,
        "payload": loads(payload),
        "response_schema": loads(response_schema),
        "timeout": timeout_seconds,
        "on_timeout": loads(on_timeout),
        "assignees": loads(assignees),
        "quorum": quorum,
        "four_eyes": bool(four_eyes),
        "require_signature": bool(require_signature),
        "priority": priority,
        "due": due_seconds,
        "escalation": loads(escalation),
    }
    return InterruptRecord(
        id=id_,
        invocation_id=as_uuid(invocation_id),
        workflow_name=workflow_name,
        path=path,
        run_id=run_id,
        request=RequestInput.from_dict(request),
        status=InterruptStatus(status),
        response=loads(response),
        consumed=bool(consumed),
        deferred=bool(deferred),
        resolved_by=resolved_by_id,
        resolved_at=aware(resolved_at),
        deadline=aware(deadline),
    )


def event_from_row(row: tuple) -> Event:
    invocation_id, author, path, run_id, status, output, route, *rest = row
    calls, responses, ids, error, at = rest
    return Event(
        invocation_id=as_uuid(invocation_id),
        author=author,
        path=path,
        run_id=run_id,
        status=NodeStatus(status) if status else None,
        output=loads(output),
        route=route or None,
        function_calls=[FunctionCall(**c) for c in loads(calls)],
        function_responses=[FunctionResponse(**r) for r in loads(responses)],
        long_running_tool_ids=list(loads(ids)),
        error=error or None,
        timestamp=at,
    )


def checkpoint_from(
    invocation_row: tuple, runs: list[tuple], interrupts: list[tuple], for_run: bool
) -> Checkpoint:
    """`for_run`: the rows leave out completed node runs' inputs and outputs."""
    return Checkpoint(
        invocation=invocation_record(invocation_row),
        node_runs=dict(node_run_state(r, not for_run) for r in runs),
        interrupts={record.id: record for record in map(interrupt_record, interrupts)},
    )


# -- records to row values ---------------------------------------------------------------
def node_run_values(
    invocation_pk: Any, node_runs: Collection[tuple[str, NodeRunState]], stamp: Any
) -> list[Any]:
    """The NODE_RUN_COLUMNS values of `(path, state)` pairs, row after row."""
    values: list[Any] = []
    for path, state in node_runs:
        values += [
            invocation_pk,
            path,
            state.parent_path,
            state.name,
            state.run_id,
            state.status,
            dumps(state.input),
            dumps(state.output),
            state.route or "",
            dumps(sorted(state.interrupt_ids)),
            dumps(state.resume_inputs),
            state.attempt,
            state.error or "",
            stamp,
            stamp,
        ]
    return values


def event_values(invocation_pk: Any, events: Iterable[Event]) -> list[Any]:
    """The EVENT_COLUMNS values of the events, row after row."""
    values: list[Any] = []
    for event in events:
        values += [
            invocation_pk,
            event.author,
            event.path,
            event.run_id,
            event.status or "",
            dumps(event.output),
            event.route or "",
            dumps([asdict(c) for c in event.function_calls]),
            dumps([asdict(r) for r in event.function_responses]),
            dumps(list(event.long_running_tool_ids)),
            event.error or "",
            event.timestamp,
        ]
    return values


def interrupt_fields(record: InterruptRecord) -> dict[str, Any]:
    """The Interrupt columns a new interrupt's row is given (the rest: LEFT_TO_DEFAULTS)."""
    request = record.request.to_dict()
    fields = {
        "id": record.id,
        "invocation_id": record.invocation_id,
        "workflow_name": record.workflow_name,
        "path": record.path,
        "run_id": record.run_id,
        "message": request["message"] or "",
        "payload": request["payload"],
        "response_schema": request["response_schema"],
        "timeout_seconds": request["timeout"],
        "on_timeout": None if request["on_timeout"] == FAIL_ON_TIMEOUT else request["on_timeout"],
        "deadline": stored_time(record.deadline),
        "status": record.status,
        "assignees": request["assignees"],
        "quorum": request["quorum"],
        "four_eyes": request["four_eyes"],
        "require_signature": request["require_signature"],
        "priority": request["priority"],
        "due_seconds": request["due"],
        "due_at": stored_time(_after(record.asked_at, request["due"])),
        "escalation": request["escalation"],
        "next_escalation_at": stored_time(
            _after(record.asked_at, request["escalation"][0]["after"])
            if request["escalation"]
            else None
        ),
    }
    # PostgreSQL's jsonb re-sorts object keys: the declared order is kept beside the values
    # that pages show field by field (approvals.display.in_declared_order restores it).
    orders = {c: key_order(fields[c]) for c in ("payload", "response_schema", "on_timeout")}
    fields["key_order"] = {column: order for column, order in orders.items() if order}
    return fields


def _after(asked_at: datetime | None, seconds: float | None) -> datetime | None:
    if seconds is None:
        return None
    return (asked_at or timezone.now()) + timedelta(seconds=seconds)


def interrupt_row(record: InterruptRecord) -> Interrupt:
    return Interrupt(**interrupt_fields(record))


def interrupt_insert_values(records: Iterable[InterruptRecord], connection: Any) -> list[Any]:
    """Every concrete Interrupt column's value of each record's row, as `connection`
    takes it (the model's defaults for the columns left to them)."""
    fields = Interrupt._meta.concrete_fields
    values: list[Any] = []
    for row in map(interrupt_row, records):
        values += [f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields]
    return values
