"""The store's server-side function on PostgreSQL: a node-run transition (the batch
`PostgreSQLDialect.step` writes) as one PL/pgSQL function, whose statements the server
plans once per connection and keeps, where the one-statement CTE is parsed and planned
at every call. Plain function calls: safe behind PgBouncer in transaction mode, unlike
prepared statements (docs/performance.md, "The store's choices, measured"). The batch
travels as one JSON parameter, decoded by the server (jsonb_array_elements): adapting a
parameter per column was a third of a transition's client instructions.

Its text is built here from the store's column lists and the models' column types, and
its name carries a digest of that text: the store calls the function of its own code's
shape or, when that one is not installed, writes the CTE as before. `install` (run
after every `migrate`, from the app's post_migrate receiver) creates it and drops the
functions of earlier shapes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from django.db import connections

from ..engine.status import InterruptStatus
from ..models import OPEN_STATUSES, NodeRun, SessionEvent
from .rows import (
    ANSWERED,
    EVENT_COLUMNS,
    EVENT_ITEMS,
    EVENTS,
    INTERRUPTS,
    INVOCATIONS,
    JSON_COLUMNS,
    NODE_RUN_COLUMNS,
    NODE_RUN_ITEMS,
    NODE_RUNS,
    NULL_WHEN_NONE,
)
from .statements import INSERT_EVENTS, INSERT_NODE_RUNS, NODE_RUN_CONFLICT

PREFIX = "hitl_step_"

# Its parameters: the invocation's id, the time the batch is written at, and the rest of
# the batch as one JSON document (rows.step_document): the driver adapts three values
# a transition instead of one per column (41 for a node run and an event).
PARAMETERS = [("p_id", "uuid"), ("p_now", "timestamp with time zone"), ("p_batch", "jsonb")]

# The batch's scalars, as the body's variables: (name, type, key in the document).
VARIABLES = [
    ("p_owner", "varchar", "owner"),
    ("p_seconds", "double precision", "seconds"),
    ("p_release", "boolean", "release"),
    ("p_set", "boolean", "set"),  # the batch carries the invocation's status, output, error
    ("p_status", "varchar", "status"),
    ("p_output", "jsonb", "output"),
    ("p_error", "text", "error"),
    ("p_final", "boolean", "final"),
    ("p_durable", "boolean", "durable"),  # false: HITL["DURABILITY"] "async", mid-pass
]

# The statements of its body; `p_` names are its parameters and variables, `r` a row of
# the document's "runs" or "events" (a JSON array of values in the order of
# rows.NODE_RUN_ITEMS or rows.EVENT_ITEMS).
STATEMENTS = [
    """UPDATE {invocations} SET
        updated_at = CASE WHEN p_set THEN p_now ELSE updated_at END,
        status = CASE WHEN p_set THEN p_status ELSE status END,
        output = CASE WHEN p_set THEN p_output ELSE output END,
        error = CASE WHEN p_set THEN p_error ELSE error END,
        finished_at = CASE WHEN p_final THEN p_now ELSE finished_at END,
        lease_owner = CASE WHEN p_release THEN '' ELSE lease_owner END,
        lease_expires_at = CASE WHEN p_release THEN NULL
            ELSE clock_timestamp() + p_seconds * interval '1 second' END
    WHERE id = p_id AND status IN ({open}) AND lease_owner = p_owner""",
    "{insert_runs} SELECT {runs} FROM jsonb_array_elements(p_batch->'runs') AS r {conflict}",
    "{insert_events} SELECT {events} FROM jsonb_array_elements(p_batch->'events') AS r",
    """UPDATE {interrupts} SET consumed = true
        WHERE id IN (SELECT jsonb_array_elements_text(p_batch->'consumed'))
        AND status IN ({answered})""",
    """UPDATE {interrupts} SET deferred = true
        WHERE id IN (SELECT jsonb_array_elements_text(p_batch->'deferred')) AND NOT consumed""",
]

# Every write after the first is conditional on it (the lease held, the invocation open).
BODY = """
DECLARE
{declarations}
BEGIN
    IF NOT p_durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    {0};
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF jsonb_array_length(p_batch->'runs') > 0 THEN
        {1};
    END IF;
    IF jsonb_array_length(p_batch->'events') > 0 THEN
        {2};
    END IF;
    IF jsonb_array_length(p_batch->'consumed') > 0 THEN
        {3};
    END IF;
    IF jsonb_array_length(p_batch->'deferred') > 0 THEN
        {4};
    END IF;
    RETURN true;
END
"""


def _quoted(values: list[Any]) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)


def _select_list(using: str, model: Any, columns: list[str], items: list[str]) -> str:
    """The values of `columns` for a row `r` of the document: the invocation's id and the
    batch's time from the parameters, the rest by position in `items`, cast to the
    column's type (a JSON column's value as it is; SQL NULL where None means no value)."""
    types = {f.column: f.db_type(connections[using]) for f in model._meta.concrete_fields}
    json_columns = JSON_COLUMNS[model._meta.db_table]
    expressions = []
    for column in columns:
        if column == "invocation_id":
            expressions.append("p_id")
        elif column not in items:
            expressions.append("p_now")  # created_at, updated_at
        elif column in NULL_WHEN_NONE:
            expressions.append(f"NULLIF(r->{items.index(column)}, CAST('null' AS jsonb))")
        elif column in json_columns:
            expressions.append(f"r->{items.index(column)}")
        else:
            expressions.append(f"CAST(r->>{items.index(column)} AS {types[column]})")
    return ", ".join(expressions)


@functools.cache
def statements(using: str) -> list[str]:
    """The SQL of the function's body, statement by statement."""
    fields = {
        "invocations": INVOCATIONS,
        "interrupts": INTERRUPTS,
        "open": _quoted(OPEN_STATUSES),
        "answered": _quoted(ANSWERED),
        "insert_runs": INSERT_NODE_RUNS,
        "runs": _select_list(using, NodeRun, NODE_RUN_COLUMNS, NODE_RUN_ITEMS),
        "conflict": NODE_RUN_CONFLICT,
        "insert_events": INSERT_EVENTS,
        "events": _select_list(using, SessionEvent, EVENT_COLUMNS, EVENT_ITEMS),
    }
    return [statement.format(**fields) for statement in STATEMENTS]


@functools.cache
def definition(using: str) -> tuple[str, str]:
    """The function's name and its CREATE statement."""
    declarations = "\n".join(
        f"    {name} {kind} := CAST(p_batch->>'{key}' AS {kind});"
        if kind != "jsonb"
        else f"    {name} {kind} := p_batch->'{key}';"
        for name, kind, key in VARIABLES
    )
    body = BODY.format(*statements(using), declarations=declarations)
    signature = ", ".join(f"{name} {kind}" for name, kind in PARAMETERS)
    shape = f"{signature}\n{body}\n{NODE_RUNS} {EVENTS} {InterruptStatus.PENDING}"
    name = PREFIX + hashlib.sha256(shape.encode()).hexdigest()[:12]
    create = (
        f"CREATE OR REPLACE FUNCTION {name}({signature}) RETURNS boolean "
        f"LANGUAGE plpgsql AS $hitl${body}$hitl$"
    )
    return name, create


@functools.cache
def call(using: str) -> str:
    """`SELECT name(%s, %s, %s)`, each value cast to its parameter's type."""
    name, _ = definition(using)
    return f"SELECT {name}({', '.join(f'CAST(%s AS {kind})' for _, kind in PARAMETERS)})"


class ServerFunction:
    """A digest-named function of this code's shape: whether it is in each database
    (looked up once per process and alias, and again after `install`), and its install,
    which drops the functions of earlier shapes (named `prefix`...)."""

    def __init__(self, prefix: str, definition: Callable[[str], tuple[str, str]]) -> None:
        self.prefix, self.definition = prefix, definition
        self.found: dict[str, bool] = {}  # by alias

    def installed(self, using: str) -> bool:
        found = self.found.get(using)
        if found is None:
            name, _ = self.definition(using)
            with connections[using].cursor() as cursor:
                cursor.execute("SELECT to_regproc(%s) IS NOT NULL", [name])
                found = self.found[using] = bool(cursor.fetchone()[0])
        return found

    def install(self, using: str) -> None:
        name, create = self.definition(using)
        with connections[using].cursor() as cursor:
            cursor.execute(create)
            cursor.execute(DROP_OTHERS.format(prefix=self.prefix, name=name))
        self.found[using] = True


DROP_OTHERS = """
DO $hitl$
DECLARE stale regprocedure;
BEGIN
    FOR stale IN SELECT oid::regprocedure FROM pg_proc
        WHERE proname LIKE '{prefix}%' AND proname <> '{name}'
        AND pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE 'DROP FUNCTION ' || stale;
    END LOOP;
END
$hitl$
"""

STEP = ServerFunction(PREFIX, definition)
installed, install = STEP.installed, STEP.install
_installed = STEP.found  # (tests and the bench mark it not installed, to run the CTE)
