"""The statements that append an entry to its chain, one class per database holding only
what differs. Both lock the chain's head row, write the entry with the head as its
prev_hash, and move the head to the entry's hash, in the caller's transaction."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from ..models import AuditChainHead, AuditEntry, Invocation
from .canonical import GENESIS, canonical_json, entry_text, sha256_hex
from .entries import entry_content

ENTRIES = AuditEntry._meta.db_table
INVOCATIONS = Invocation._meta.db_table
HEADS = AuditChainHead._meta.db_table
SYSTEM_HEAD_ID = 1

# Written from the entry; prev_hash, entry_hash, created_at and the canonical text come
# from the chain's head.
VALUE_COLUMNS = [
    "invocation_id",
    "interrupt_id",
    "action",
    "actor_id",
    "actor_name",
    "on_behalf_of_id",
    "data",
    "subject_hash",
]
ENTRY_COLUMNS = ", ".join(
    [*VALUE_COLUMNS, "prev_hash", "entry_hash", "created_at", "canonical_text"]
)

ENSURE_SYSTEM_HEAD = (
    f"INSERT INTO {HEADS} (id, entry_hash) VALUES ({SYSTEM_HEAD_ID}, %s) "
    "ON CONFLICT (id) DO NOTHING"
)
# {table}, {column}: where the chain's head is kept; {lock}: the row lock.
READ_HEAD = "SELECT {column} FROM {table} WHERE id = %s{lock}"
SET_HEAD = "UPDATE {table} SET {column} = %s WHERE id = %s"
INSERT_ENTRY = f"INSERT INTO {ENTRIES} ({ENTRY_COLUMNS}) VALUES ({{marks}}) RETURNING id"

# PostgreSQL: the whole append in one statement. The server reads and locks the head,
# takes the time from its clock, and hashes the entry's canonical JSON (keeping it as the
# entry's canonical_text), which arrives in three pieces around the two values only it
# knows (created_at, prev_hash).
APPEND = (
    "WITH head AS (SELECT COALESCE(NULLIF({column}, ''), %s) AS prev, clock_timestamp() AS at "
    "FROM {table} WHERE id = %s FOR NO KEY UPDATE), "
    "written AS (SELECT prev, at, CAST(%s AS text) || {stamp} || CAST(%s AS text) || prev || "
    "CAST(%s AS text) AS body FROM head), "
    "hashed AS (SELECT prev, at, body, encode(sha256(convert_to(body, 'UTF8')), 'hex') "
    "AS digest FROM written), "
    f"entry AS (INSERT INTO {ENTRIES} ({ENTRY_COLUMNS}) SELECT {{casts}}, prev, digest, at, "
    "body FROM hashed RETURNING id, prev_hash, entry_hash, created_at) "
    "UPDATE {table} SET {column} = entry.entry_hash FROM entry WHERE {table}.id = %s "
    "RETURNING entry.id, entry.prev_hash, entry.entry_hash, entry.created_at"
)
# The time as canonical.timestamp writes it: UTC with USE_TZ, else the session's zone.
UTC_STAMP = """to_char({at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
LOCAL_STAMP = """to_char({at}, 'YYYY-MM-DD"T"HH24:MI:SS.US')"""


def stamp(at: str, use_tz: bool) -> str:
    """The SQL of time `at` as canonical.timestamp writes it."""
    return (UTC_STAMP if use_tz else LOCAL_STAMP).format(at=at)


# Placeholders for the two values the server fills in: NUL cannot occur in what
# PostgreSQL stores as JSON, so they occur once each in an entry's canonical JSON.
TIME_MARK, HEAD_MARK = "\x00created_at\x00", "\x00prev_hash\x00"


@dataclass(frozen=True)
class Chain:
    """Where a chain's head is kept: the invocation row, or the one AuditChainHead row."""

    table: str
    column: str
    row: Any

    @property
    def system(self) -> bool:
        return self.table == HEADS


SYSTEM_CHAIN = Chain(HEADS, "entry_hash", SYSTEM_HEAD_ID)


def invocation_chain(key: Any) -> Chain:
    return Chain(INVOCATIONS, "audit_head", key)


class SqliteTrail:
    """SQLite (and the default for other databases): read the locked head, hash here with
    this process's clock (SQLite is embedded: its clock is this machine's), insert the
    entry, move the head."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.lock = " FOR UPDATE" if connection.features.has_select_for_update else ""

    def append(self, cursor: Any, entry: AuditEntry, values: list[Any], chain: Chain) -> bool:
        """Fill in the entry's prev_hash, entry_hash, created_at and id; False when the
        chain's head row does not exist."""
        cursor.execute(
            READ_HEAD.format(table=chain.table, column=chain.column, lock=self.lock), [chain.row]
        )
        row = cursor.fetchone()
        if row is None:
            return False
        entry.prev_hash, entry.created_at = row[0] or GENESIS, timezone.now()
        entry.canonical_text = entry_text(entry_content(entry))
        entry.entry_hash = sha256_hex(entry.canonical_text.encode("utf-8"))
        stored_time = self.connection.ops.adapt_datetimefield_value(entry.created_at)
        marks = ", ".join(["%s"] * (len(VALUE_COLUMNS) + 4))
        cursor.execute(
            INSERT_ENTRY.format(marks=marks),
            [*values, entry.prev_hash, entry.entry_hash, stored_time, entry.canonical_text],
        )
        (entry.id,) = cursor.fetchone()
        cursor.execute(
            SET_HEAD.format(table=chain.table, column=chain.column), [entry.entry_hash, chain.row]
        )
        return True


class PostgresTrail(SqliteTrail):
    """PostgreSQL: one round trip, the time from the server's clock; the hash it computed
    is checked here against the canonical form. The audit function's call (`function`,
    audit/functions.py: its plans kept by the server) when installed, else one statement
    (APPEND)."""

    def __init__(self, connection: Any, function: str | None = None) -> None:
        super().__init__(connection)
        self.function = function

    def append(self, cursor: Any, entry: AuditEntry, values: list[Any], chain: Chain) -> bool:
        cursor.execute(*self.statement(entry, values, chain))
        return self.appended(entry, cursor.fetchone())

    def statement(self, entry: AuditEntry, values: list[Any], chain: Chain) -> tuple[str, list]:
        """The one statement that appends the entry; its row goes to `appended`."""
        entry.prev_hash = HEAD_MARK  # (created_at is not set yet: the server sets it)
        text = canonical_json({**entry_content(entry), "created_at": TIME_MARK}).decode("utf-8")
        before_time, _, rest = text.partition(json_text(TIME_MARK))
        before_head, _, after_head = rest.partition(json_text(HEAD_MARK))
        pieces = [GENESIS, before_time, before_head, after_head]
        if self.function is not None:  # the chain is the entry's invocation's, or the system's
            return self.function, [settings.USE_TZ, *pieces, *values]
        return (
            append_statement(chain.table, chain.column, settings.USE_TZ, self.connection.alias),
            [GENESIS, chain.row, *pieces[1:], *values, chain.row],
        )

    def appended(self, entry: AuditEntry, row: Any) -> bool:
        """Fill in the entry from the statement's row; False when the chain's head row
        does not exist."""
        if row is None or row[0] is None:
            return False
        entry.id, entry.prev_hash, digest, entry.created_at = row
        entry.canonical_text = entry_text(entry_content(entry))
        entry.entry_hash = sha256_hex(entry.canonical_text.encode("utf-8"))
        if digest != entry.entry_hash:
            raise RuntimeError(
                f"the database hashed audit entry {entry.id} as {digest}, not as its canonical "
                f"form ({entry.entry_hash}): is the database's encoding UTF8?"
            )
        return True


def json_text(mark: str) -> str:
    return canonical_json(mark).decode("utf-8")[1:-1]  # as it appears inside a JSON string


@functools.cache
def append_statement(table: str, column: str, use_tz: bool, using: str) -> str:
    connection = connections[using]
    types = {f.column: f.db_type(connection) for f in AuditEntry._meta.concrete_fields}
    casts = ", ".join(f"CAST(%s AS {types[c]})" for c in VALUE_COLUMNS)
    return APPEND.format(table=table, column=column, casts=casts, stamp=stamp("at", use_tz))
