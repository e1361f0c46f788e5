"""Writing the audit trail: `record` appends one entry to its chain, in the caller's
transaction.

Each invocation's chain has its head on the invocation row (the row every write path
locks first), so entries of different invocations never wait on each other; actions
outside any invocation share one chain whose head is the one row of AuditChainHead.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from ..models import AuditChainHead, AuditEntry, Interrupt, Invocation
from .actions import ACTIONS
from .canonical import GENESIS, canonical_json, entry_hash, subject_hash, timestamp

ENTRIES = AuditEntry._meta.db_table
INVOCATIONS = Invocation._meta.db_table
HEADS = AuditChainHead._meta.db_table
SYSTEM_HEAD_ID = 1

ENTRY_COLUMNS = ", ".join(
    [
        "invocation_id",
        "interrupt_id",
        "action",
        "actor_id",
        "actor_name",
        "on_behalf_of_id",
        "data",
        "subject_hash",
        "prev_hash",
        "entry_hash",
        "created_at",
    ]
)
ENTRY_VALUES = "%s, %s, %s, %s, %s, %s, {json}, %s, %s, %s, %s"  # {json}: the data

# {clock}: the entry's time where the database gives it; {lock}: the row lock.
INVOCATION_HEAD = f"SELECT audit_head{{clock}} FROM {INVOCATIONS} WHERE id = %s{{lock}}"
SET_INVOCATION_HEAD = f"UPDATE {INVOCATIONS} SET audit_head = %s WHERE id = %s"
ENSURE_SYSTEM_HEAD = (
    f"INSERT INTO {HEADS} (id, entry_hash) VALUES ({SYSTEM_HEAD_ID}, %s) "
    "ON CONFLICT (id) DO NOTHING"
)
SYSTEM_HEAD = f"SELECT entry_hash{{clock}} FROM {HEADS} WHERE id = {SYSTEM_HEAD_ID}{{lock}}"
SET_SYSTEM_HEAD = f"UPDATE {HEADS} SET entry_hash = %s WHERE id = {SYSTEM_HEAD_ID}"
INSERT_ENTRY = f"INSERT INTO {ENTRIES} ({ENTRY_COLUMNS}) VALUES ({ENTRY_VALUES}) RETURNING id"


class SqliteTrail:
    """SQLite (and the default for other databases): the entry's time is this process's
    clock (SQLite is embedded: its clock is this machine's); the entry and the new head
    are two statements."""

    clock = ""
    json = "%s"

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.lock = " FOR UPDATE" if connection.features.has_select_for_update else ""

    def read_head(self, cursor: Any, sql: str, params: list[Any]) -> tuple[str | None, Any]:
        """The locked head (None: no such row) and the entry's time."""
        cursor.execute(sql.format(clock=self.clock, lock=self.lock), params)
        row = cursor.fetchone()
        return (row[0], self.entry_time(row)) if row else (None, None)

    def entry_time(self, row: tuple) -> Any:
        return timezone.now()

    def append(self, cursor: Any, values: list[Any], set_head: str, head_params: list[Any]) -> int:
        """Insert the entry, move the head; the entry's id."""
        cursor.execute(INSERT_ENTRY.format(json=self.json), values)
        (entry_id,) = cursor.fetchone()
        cursor.execute(set_head, head_params)
        return entry_id

    def db_time(self, moment: Any) -> Any:
        return self.connection.ops.adapt_datetimefield_value(moment)


class PostgresTrail(SqliteTrail):
    """PostgreSQL: the entry's time is the server's clock, read with the locked head;
    the entry and the new head are one statement."""

    clock = ", clock_timestamp()"
    json = "CAST(%s AS jsonb)"

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.lock = " FOR NO KEY UPDATE"  # the lock the store takes on invocation rows

    def entry_time(self, row: tuple) -> Any:
        return row[1]

    def append(self, cursor: Any, values: list[Any], set_head: str, head_params: list[Any]) -> int:
        insert = INSERT_ENTRY.format(json=self.json)
        cursor.execute(
            f"WITH entry AS ({insert}) {set_head} RETURNING (SELECT id FROM entry)",
            [*values, *head_params],
        )
        (entry_id,) = cursor.fetchone()
        return entry_id

    def db_time(self, moment: Any) -> Any:
        return moment  # psycopg adapts datetimes itself


def dialect(using: str = DEFAULT_DB_ALIAS) -> SqliteTrail:
    connection = connections[using]
    if connection.vendor == "postgresql":
        return PostgresTrail(connection)
    return SqliteTrail(connection)


def question_subject(interrupt: Any) -> dict[str, Any]:
    """What a question asked, as its subject_hash covers it: an Interrupt row, or the
    engine's InterruptRecord (its `request`)."""
    request = getattr(interrupt, "request", interrupt)
    return {
        "message": request.message,
        "payload": request.payload,
        "response_schema": request.response_schema,
    }


def _interrupt(interrupt: Any, using: str) -> Any:
    if isinstance(interrupt, str):
        return Interrupt.objects.using(using).get(pk=interrupt)
    return interrupt


def entry_content(entry: AuditEntry) -> dict[str, Any]:
    """The ENTRY_FIELDS of an entry as its entry_hash covers them."""
    return {
        "invocation": str(entry.invocation_id) if entry.invocation_id is not None else None,
        "interrupt_id": entry.interrupt_id,
        "action": entry.action,
        "actor": str(entry.actor_id) if entry.actor_id is not None else None,
        "actor_name": entry.actor_name,
        "on_behalf_of": str(entry.on_behalf_of_id) if entry.on_behalf_of_id is not None else None,
        "data": entry.data,
        "subject_hash": entry.subject_hash,
        "prev_hash": entry.prev_hash,
        "created_at": timestamp(entry.created_at),
    }


def record(
    action: str,
    *,
    invocation_id: Any = None,
    interrupt: Any = None,
    actor: Any = None,
    on_behalf_of: Any = None,
    data: dict[str, Any] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> AuditEntry:
    """Append an entry for `action` to its chain, in the caller's transaction (so it is
    kept exactly when the change it records is), and return it.

    `interrupt` (an Interrupt, the engine's InterruptRecord, or an interrupt id) binds the
    entry to what the question asked and names its invocation; without it the entry
    joins `invocation_id`'s chain, or with neither the chain of actions outside any
    invocation. `actor` None is the system. Locks the chain's head until commit.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}; known: {', '.join(ACTIONS)}")
    entry = AuditEntry(action=action, data={} if data is None else data)
    if interrupt is not None:
        interrupt = _interrupt(interrupt, using)
        entry.interrupt_id = str(interrupt.id)
        entry.subject_hash = subject_hash(**question_subject(interrupt))
        invocation_id = interrupt.invocation_id if invocation_id is None else invocation_id
    if invocation_id is not None:
        entry.invocation_id = Invocation._meta.pk.to_python(invocation_id)
    if actor is not None and actor.pk is not None:
        entry.actor_id, entry.actor_name = actor.pk, actor.get_username()
    if on_behalf_of is not None:
        entry.on_behalf_of_id = on_behalf_of.pk
    trail = dialect(using)
    connection = connections[using]
    with transaction.atomic(using=using, savepoint=False), connection.cursor() as cursor:
        if entry.invocation_id is None:
            cursor.execute(ENSURE_SYSTEM_HEAD, [GENESIS])
            head, entry.created_at = trail.read_head(cursor, SYSTEM_HEAD, [])
            key, set_head, head_params = None, SET_SYSTEM_HEAD, []
        else:
            key = Invocation._meta.pk.get_db_prep_value(entry.invocation_id, connection)
            head, entry.created_at = trail.read_head(cursor, INVOCATION_HEAD, [key])
            if head is None:
                raise Invocation.DoesNotExist(f"no invocation {entry.invocation_id}")
            set_head, head_params = SET_INVOCATION_HEAD, [key]
        entry.prev_hash = head or GENESIS
        entry.entry_hash = entry_hash(entry_content(entry))
        values = [
            key,
            entry.interrupt_id,
            action,
            entry.actor_id,
            entry.actor_name,
            entry.on_behalf_of_id,
            canonical_json(entry.data).decode("utf-8"),
            entry.subject_hash,
            entry.prev_hash,
            entry.entry_hash,
            trail.db_time(entry.created_at),
        ]
        entry.id = trail.append(cursor, values, set_head, [entry.entry_hash, *head_params])
    entry._state.adding, entry._state.db = False, using
    return entry
