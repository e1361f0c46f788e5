"""The audit trail's server-side function on PostgreSQL: an entry appended to its chain
(the head locked, the server's time stamped, the canonical text hashed, the entry
inserted, the head moved) as one PL/pgSQL function whose statements the server plans
once per connection and keeps. The one-statement CTE it replaces (dialects.APPEND) was
parsed and planned at every entry: 0.6 ms of an answer's 1.1 ms audit write
(docs/performance.md). A plain function call: safe behind PgBouncer in transaction mode.

Like the store's function (store/functions.py) its name carries a digest of its text; it
is (re)created after every `migrate`, and while it is not installed the CTE is used.
"""

from __future__ import annotations

import functools
import hashlib

from django.db import connections

from ..models import AuditEntry
from ..store import functions
from .dialects import ENTRIES, ENTRY_COLUMNS, HEADS, INVOCATIONS, SYSTEM_HEAD_ID, VALUE_COLUMNS
from .dialects import stamp as stamp_expression

PREFIX = "hitl_append_"  # (not hitl_audit_: the append-only trigger's function has that)

# The head, the entry's canonical text in three pieces around the two values only the
# server knows (created_at, prev_hash), then the entry's values (VALUE_COLUMNS). An entry
# whose invocation_id is NULL joins the chain of actions outside any invocation.
TEXT_PARAMETERS = ["p_genesis", "p_before_time", "p_before_head", "p_after_head"]
# settings.USE_TZ, passed at each call: the time is written in UTC, or in the session's zone.
UTC_PARAMETER = "p_utc boolean"

BODY = """
DECLARE
    v_prev text;
    v_at timestamp with time zone := clock_timestamp();
    v_body text;
    v_hash text;
BEGIN
    IF p_invocation_id IS NULL THEN
        SELECT COALESCE(NULLIF(entry_hash, ''), p_genesis) INTO v_prev
            FROM {heads} WHERE id = {system} FOR NO KEY UPDATE;
    ELSE
        SELECT COALESCE(NULLIF(audit_head, ''), p_genesis) INTO v_prev
            FROM {invocations} WHERE id = p_invocation_id FOR NO KEY UPDATE;
    END IF;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_body := p_before_time || CASE WHEN p_utc THEN {utc} ELSE {local} END
        || p_before_head || v_prev || p_after_head;
    v_hash := encode(sha256(convert_to(v_body, 'UTF8')), 'hex');
    INSERT INTO {entries} ({columns}) VALUES ({values}, v_prev, v_hash, v_at, v_body)
        RETURNING id INTO o_id;
    IF p_invocation_id IS NULL THEN
        UPDATE {heads} SET entry_hash = v_hash WHERE id = {system};
    ELSE
        UPDATE {invocations} SET audit_head = v_hash WHERE id = p_invocation_id;
    END IF;
    o_prev := v_prev;
    o_hash := v_hash;
    o_at := v_at;
END
"""


@functools.cache
def definition(using: str) -> tuple[str, str]:
    """The function's name and its CREATE statement."""
    connection = connections[using]
    types = {f.column: f.db_type(connection) for f in AuditEntry._meta.concrete_fields}
    body = BODY.format(
        heads=HEADS,
        invocations=INVOCATIONS,
        entries=ENTRIES,
        system=SYSTEM_HEAD_ID,
        utc=stamp_expression("v_at", True),
        local=stamp_expression("v_at", False),
        columns=ENTRY_COLUMNS,
        values=", ".join(f"p_{column}" for column in VALUE_COLUMNS),
    )
    signature = ", ".join(
        [UTC_PARAMETER]
        + [f"{name} text" for name in TEXT_PARAMETERS]
        + [f"p_{column} {types[column]}" for column in VALUE_COLUMNS]
        + ["OUT o_id bigint", "OUT o_prev text", "OUT o_hash text"]
        + ["OUT o_at timestamp with time zone"]
    )
    name = PREFIX + hashlib.sha256(f"{signature}\n{body}".encode()).hexdigest()[:12]
    create = (
        f"CREATE OR REPLACE FUNCTION {name}({signature}) LANGUAGE plpgsql AS $hitl${body}$hitl$"
    )
    return name, create


@functools.cache
def call(using: str) -> str:
    """`SELECT o_id, o_prev, o_hash, o_at FROM name(%s, ...)`: USE_TZ, then the pieces and
    the values."""
    name, _ = definition(using)
    marks = ", ".join(["%s"] * (1 + len(TEXT_PARAMETERS) + len(VALUE_COLUMNS)))
    return f"SELECT o_id, o_prev, o_hash, o_at FROM {name}({marks})"


APPEND = functions.ServerFunction(PREFIX, definition)
installed, install = APPEND.installed, APPEND.install
_installed = APPEND.found  # (a test marks it not installed, to run the CTE)
