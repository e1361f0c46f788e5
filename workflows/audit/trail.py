"""Writing the audit trail: `record` appends one entry to its chain, in the caller's
transaction.

Each invocation's chain has its head on the invocation row (the row every write path
locks first), so entries of different invocations never wait on each other; actions
outside any invocation share one chain whose head is the one row of AuditChainHead.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ..models import AuditEntry, Interrupt, Invocation
from ..store import DjangoStore
from ..store.dialect import Checked
from . import functions
from .actions import ACTIONS
from .canonical import GENESIS, canonical_json, subject_hash
from .dialects import (
    ENSURE_SYSTEM_HEAD,
    SYSTEM_CHAIN,
    PostgresTrail,
    SqliteTrail,
    invocation_chain,
)
from .entries import entry_content, question_subject

__all__ = ["appending", "entry_content", "question_subject", "record"]


def _interrupt(interrupt: Any, using: str) -> Any:
    if isinstance(interrupt, str):
        return Interrupt.objects.using(using).get(pk=interrupt)
    return interrupt


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
    entry, values = _entry(action, invocation_id, interrupt, actor, on_behalf_of, data, using)
    key = values[0]
    # The driver's own cursor, as the store's statements run: Django's cursor wrapper (and
    # psycopg's client-side binding under it) cost more than these statements.
    with transaction.atomic(using=using, savepoint=False), DjangoStore(using).cursor() as cursor:
        if key is None:
            cursor.execute(ENSURE_SYSTEM_HEAD, [GENESIS])
        chain = SYSTEM_CHAIN if key is None else invocation_chain(key)
        if not dialect(using).append(cursor, entry, values, chain):
            raise Invocation.DoesNotExist(f"no invocation {entry.invocation_id}")
    entry._state.adding, entry._state.db = False, using
    return entry


def appending(
    action: str,
    *,
    interrupt: Any,
    actor: Any = None,
    on_behalf_of: Any = None,
    data: dict[str, Any] | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> tuple[AuditEntry, Checked] | None:
    """`record` of an entry about `interrupt` as one statement to send with the caller's
    other writes (`DjangoStore.commit_with_sync`), whose check fills the entry in; where
    the database appends in one statement (PostgreSQL), else None: `record` it."""
    trail = dialect(using)
    if not isinstance(trail, PostgresTrail):
        return None
    entry, values = _entry(action, None, interrupt, actor, on_behalf_of, data, using)
    sql, params = trail.statement(entry, values, invocation_chain(values[0]))

    def appended(cursor: Any) -> None:
        if not trail.appended(entry, cursor.fetchone()):
            raise Invocation.DoesNotExist(f"no invocation {entry.invocation_id}")
        entry._state.adding, entry._state.db = False, using

    return entry, (sql, params, appended)


def _entry(
    action: str,
    invocation_id: Any,
    interrupt: Any,
    actor: Any,
    on_behalf_of: Any,
    data: dict[str, Any] | None,
    using: str,
) -> tuple[AuditEntry, list[Any]]:
    """The entry (without its chain's fields) and the values its statement writes."""
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
    key = None
    if entry.invocation_id is not None:
        key = Invocation._meta.pk.get_db_prep_value(entry.invocation_id, connections[using])
    values = [
        key,
        entry.interrupt_id,
        action,
        entry.actor_id,
        entry.actor_name,
        entry.on_behalf_of_id,
        canonical_json(entry.data).decode("utf-8"),
        entry.subject_hash,
    ]
    return entry, values


def dialect(using: str) -> SqliteTrail:
    """The statements that append an entry on database `using`."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return SqliteTrail(connection)
    installed = functions.installed(using)
    return PostgresTrail(connection, functions.call(using) if installed else None)
