"""The store's server-side function on PostgreSQL: a node-run transition (the batch
`PostgreSQLDialect.step` writes) as one PL/pgSQL function, whose statements the server
plans once per connection and keeps, where the one-statement CTE is parsed and planned
at every call. Plain function calls: safe behind PgBouncer in transaction mode, unlike
prepared statements (docs/performance.md, "The store's choices, measured").

Its text is built here from the store's column lists and the models' column types, and
its name carries a digest of that text: the store calls the function of its own code's
shape or, when that one is not installed, writes the CTE as before. `install` (run
after every `migrate`, from the app's post_migrate receiver) creates it and drops the
functions of earlier shapes.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from django.db import connections

from ..engine.status import InterruptStatus
from ..models import OPEN_STATUSES, NodeRun, SessionEvent
from .rows import (
    ANSWERED,
    EVENT_COLUMNS,
    EVENTS,
    INTERRUPTS,
    INVOCATIONS,
    NODE_RUN_COLUMNS,
    NODE_RUNS,
)
from .statements import INSERT_EVENTS, INSERT_NODE_RUNS, NODE_RUN_CONFLICT

PREFIX = "hitl_step_"

# The parameters before the node runs' and events' columns (one array each), and after.
HEAD_PARAMETERS = [
    ("p_id", "uuid"),
    ("p_owner", "varchar"),
    ("p_seconds", "double precision"),
    ("p_release", "boolean"),
    ("p_set", "boolean"),  # the batch carries the invocation's status, output and error
    ("p_status", "varchar"),
    ("p_output", "jsonb"),
    ("p_error", "text"),
    ("p_final", "boolean"),
    ("p_now", "timestamp with time zone"),
]
TAIL_PARAMETERS = [("p_consumed", "varchar[]"), ("p_deferred", "varchar[]")]

# The statements of its body; `p_`, `r_` and `e_` names are its parameters.
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
    "{insert_runs} SELECT p_id, * FROM unnest({runs}) {conflict}",
    "{insert_events} SELECT p_id, * FROM unnest({events})",
    """UPDATE {interrupts} SET consumed = true
        WHERE id = ANY(p_consumed) AND status IN ({answered})""",
    "UPDATE {interrupts} SET deferred = true WHERE id = ANY(p_deferred) AND NOT consumed",
]

# Every write after the first is conditional on it (the lease held, the invocation open).
BODY = """
BEGIN
    {0};
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF cardinality({first_run}) > 0 THEN
        {1};
    END IF;
    IF cardinality({first_event}) > 0 THEN
        {2};
    END IF;
    IF cardinality(p_consumed) > 0 THEN
        {3};
    END IF;
    IF cardinality(p_deferred) > 0 THEN
        {4};
    END IF;
    RETURN true;
END
"""


def _quoted(values: list[Any]) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)


def _array_parameters(using: str, model: Any, prefix: str, columns: list[str]) -> list[tuple]:
    """One array parameter per column but the invocation's id (the function's p_id)."""
    types = {f.column: f.db_type(connections[using]) for f in model._meta.concrete_fields}
    return [(f"{prefix}{c}", f"{types[c]}[]") for c in columns if c != "invocation_id"]


@functools.cache
def parameters(using: str) -> list[tuple[str, str]]:
    """The function's parameters, (name, type), in call order."""
    return [
        *HEAD_PARAMETERS,
        *_array_parameters(using, NodeRun, "r_", NODE_RUN_COLUMNS),
        *_array_parameters(using, SessionEvent, "e_", EVENT_COLUMNS),
        *TAIL_PARAMETERS,
    ]


@functools.cache
def statements(using: str) -> list[str]:
    """The SQL of the function's body, statement by statement."""
    names = [name for name, _ in parameters(using)]
    fields = {
        "invocations": INVOCATIONS,
        "interrupts": INTERRUPTS,
        "open": _quoted(OPEN_STATUSES),
        "answered": _quoted(ANSWERED),
        "insert_runs": INSERT_NODE_RUNS,
        "runs": ", ".join(n for n in names if n.startswith("r_")),
        "conflict": NODE_RUN_CONFLICT,
        "insert_events": INSERT_EVENTS,
        "events": ", ".join(n for n in names if n.startswith("e_")),
    }
    return [statement.format(**fields) for statement in STATEMENTS]


@functools.cache
def definition(using: str) -> tuple[str, str]:
    """The function's name and its CREATE statement."""
    params = parameters(using)
    first_run = next(name for name, _ in params if name.startswith("r_"))
    first_event = next(name for name, _ in params if name.startswith("e_"))
    body = BODY.format(*statements(using), first_run=first_run, first_event=first_event)
    signature = ", ".join(f"{name} {kind}" for name, kind in params)
    shape = f"{signature}\n{body}\n{NODE_RUNS} {EVENTS} {InterruptStatus.PENDING}"
    name = PREFIX + hashlib.sha256(shape.encode()).hexdigest()[:12]
    create = (
        f"CREATE OR REPLACE FUNCTION {name}({signature}) RETURNS boolean "
        f"LANGUAGE plpgsql AS $hitl${body}$hitl$"
    )
    return name, create


@functools.cache
def call(using: str) -> str:
    """`SELECT name(%s, ...)`, each value cast to its parameter's type."""
    name, _ = definition(using)
    return f"SELECT {name}({', '.join(f'CAST(%s AS {kind})' for _, kind in parameters(using))})"


# Aliases (database names) whose function of this code's shape was found installed.
_installed: dict[str, bool] = {}


def installed(using: str) -> bool:
    """Whether the function of this code's shape is in the database (looked up once per
    process and alias, and again after `install`)."""
    found = _installed.get(using)
    if found is None:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT to_regproc(%s) IS NOT NULL", [definition(using)[0]])
            found = _installed[using] = bool(cursor.fetchone()[0])
    return found


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


def install(using: str) -> None:
    """Create the function of this code's shape and drop the ones of earlier shapes."""
    name, create = definition(using)
    with connections[using].cursor() as cursor:
        cursor.execute(create)
        cursor.execute(DROP_OTHERS.format(prefix=PREFIX, name=name))
    _installed[using] = True
