"""The engine's Store protocol on the Django ORM.

Every method has a synchronous core (`*_sync`) that services call inside their own
transactions, and the async method the engine awaits, which runs the core in the caller's
thread (asgiref's thread-sensitive executor) so it shares its connection. A store made
with `inline=True` is for an engine whose event loop runs in the thread that owns the
connection (services.execute): it runs the cores there directly, with no thread hop (a
hop costs about 312,000 instructions a call, a direct call 1,900: docs/performance.md,
"The store's choices, measured"), and renews the lease from a thread of its own (see
`keep_alive`).

The SQL is in statements.py and the row mapping in rows.py; how the database runs it is
the store's dialect, chosen once per store from the alias's backend.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import signals
from ..engine.errors import (
    DuplicateInterruptError,
    InterruptNotPendingError,
    InterruptSupersededError,
    InvocationCancelledError,
    InvocationFinishedError,
    LeaseLostError,
)
from ..engine.events import Event, RequestInput
from ..engine.state import (
    Checkpoint,
    InterruptRecord,
    InvocationRecord,
    WriteBatch,
)
from ..engine.status import InterruptStatus, NodeStatus
from ..models import Interrupt, Invocation, Session
from ..principals import unreachable_quorum
from . import actions
from . import statements as sql
from .actions import AgentActions
from .dialect import Checked, Dialect
from .leases import Leasing
from .rewinds import RewindReading
from .rows import (
    EVENT_COLUMNS,
    NODE_RUN_COLUMNS,
    checkpoint_from,
    event_from_row,
    inserted_fields,
    interrupt_insert_values,
    interrupt_record,
    loads,
)
from .threads import KEEP_ALIVE, in_caller_thread, outside_loop

# The dialect of each Django backend (`connection.vendor`); any other runs the portable one.
DIALECTS = {
    "postgresql": "workflows.store.postgresql.PostgreSQLDialect",
    "sqlite": "workflows.store.sqlite.SQLiteDialect",
}


def dialect_for(using: str) -> Dialect:
    """The dialect of the database alias `using` (imported when first needed: psycopg is
    an optional dependency)."""
    path = DIALECTS.get(connections[using].vendor)
    return import_string(path)(using) if path else Dialect(using)


class DjangoStore(AgentActions, Leasing, RewindReading):
    """Store on the ORM (database alias `using`); grants and effects: `AgentActions`."""

    def __init__(
        self, using: str = "default", lease_seconds: float = 60.0, *, inline: bool = False
    ) -> None:
        self.using = using
        self.dialect = dialect_for(using)
        self.lease_seconds = lease_seconds
        # The engine's loop runs in this thread (it owns the connection): no thread hops.
        self.inline = inline
        if inline:
            # The loop is busy while a synchronous body runs: a thread renews the lease.
            self.keep_alive = partial(KEEP_ALIVE.keep_alive, self)

    # -- reads ---------------------------------------------------------------------------
    # Plain SQL: they sit on the resume path, and reading a checkpoint through the ORM
    # takes seven times the instructions (docs/performance.md, as above).
    def load_checkpoint_sync(self, invocation_id: str, *, lock: bool = False) -> Checkpoint | None:
        query, params = sql.invocation(self.dialect.pk(invocation_id))
        rows = self.dialect.select((self.dialect.locking(query) if lock else query, params))
        if not rows:
            return None
        runs, interrupts = self.dialect.read_checkpoint(self._checkpoint_reads(rows[0][0]))
        return checkpoint_from(rows[0], runs, interrupts, False)

    def _checkpoint_reads(
        self, invocation_id: Any, for_run: bool = False
    ) -> tuple[sql.Statement, sql.Statement]:
        """The node-run and open-interrupt reads of a checkpoint; `for_run`: what a run
        needs, without the inputs and outputs of completed node runs (NOT_LOADED)."""
        pk = self.dialect.pk(invocation_id)
        return sql.node_runs(pk, for_run), sql.open_interrupts(pk)

    def load_outputs_sync(self, invocation_id: str, parent_path: str) -> dict[str, Any]:
        """The outputs of the completed children of the node run at `parent_path`."""
        rows = self.dialect.select(
            sql.completed_outputs(self.dialect.pk(invocation_id), parent_path)
        )
        return {path: loads(output) for path, output in rows}

    def lock_for_answers_sync(self, interrupt_ids: Iterable[str]) -> dict[str, InterruptRecord]:
        """Lock the invocation that holds these interrupts, then the interrupt rows (the one
        lock order, see lock_invocation_sync), and return them. The invocation is found and
        locked in one statement (when the ids belong to several invocations, a submission
        refused later, each of them in id order); where the dialect pipelines, both
        statements go in one round trip, run in that order."""
        ids = sorted(set(interrupt_ids))
        if not ids:
            return {}
        owners, owners_params = sql.invocations_holding(ids)
        interrupts, interrupts_params = sql.interrupts(ids)
        locking = self.dialect.locking
        _, rows = self.dialect.select_each(
            [(locking(owners), owners_params), (locking(interrupts), interrupts_params)]
        )
        return {record.id: record for record in map(interrupt_record, rows)}

    def read_for_execution_sync(self, invocation_id: str) -> tuple[str, str, int] | None:
        """What a delivery needs before it runs an open invocation: its workflow name and
        version, and its unfinished deliveries, counting this one when it takes over an
        expired lease (a run that never finished). None: not open."""
        return self.dialect.read_for_execution(self.dialect.pk(invocation_id), timezone.now())

    def lock_invocation_sync(self, invocation_id: str) -> None:
        """Lock the invocation row for this transaction: the first lock every write path
        takes (the one lock order), before any of the invocation's interrupt rows."""
        query, params = sql.invocation_key(self.dialect.pk(invocation_id))
        self.dialect.select((self.dialect.locking(query), params))

    def load_interrupts_sync(
        self, ids: Iterable[str], *, lock: bool = False
    ) -> dict[str, InterruptRecord]:
        ids = sorted(set(ids))
        if not ids:
            return {}
        query, params = sql.interrupts(ids)
        rows = self.dialect.select((self.dialect.locking(query) if lock else query, params))
        return {record.id: record for record in map(interrupt_record, rows)}

    def load_events_sync(self, invocation_id: str) -> list[Event]:
        rows = self.dialect.select(sql.events(self.dialect.pk(invocation_id)))
        return [event_from_row(r) for r in rows]

    def cursor(self) -> contextlib.AbstractContextManager[Any]:
        """The store's own cursor (the dialect's driver cursor), for statements of the
        write path outside the store that run as often as its own: the audit trail's."""
        return self.dialect.cursor()

    def check_assignees_sync(self, invocation_id: str, requests: list[RequestInput]) -> None:
        """ValueError when the users a request's groups and named users hold cannot give its
        quorum (the engine counts a list of users alone itself)."""
        grouped = [r for r in requests if any(a.startswith("group:") for a in r.assignees)]
        if not grouped:
            return
        starter = (
            Invocation.objects.using(self.using)
            .filter(pk=invocation_id)
            .values_list("started_by_id", flat=True)
            .first()
        )
        for request in grouped:
            excluded = [starter] if request.four_eyes else []
            problem = unreachable_quorum(request.assignees, request.quorum, excluded=excluded)
            if problem:
                raise ValueError(f"interrupt {request.interrupt_id!r}: {problem}")

    # -- writes ------------------------------------------------------------------------
    # The per-step path (invocation row, node runs, events, consumed answers) is plain SQL:
    # it runs once per node transition, and the ORM's per-call compilation costs more than
    # the database's work (on SQLite 3.67 against 0.77 million instructions a transition:
    # docs/performance.md, as above).

    def commit_sync(self, batch: WriteBatch, *, savepoint: bool = True) -> bool:
        """Apply the batch (see the Store protocol). Inside a caller's transaction the
        batch is a savepoint, so that a refused batch leaves nothing behind and the
        transaction goes on; `savepoint=False` when the caller's transaction ends with
        any error anyway (the services' write transactions)."""
        now = timezone.now()
        waiting = None
        step = self.dialect.step(batch, now, self.lease_seconds)
        if step is not None:
            ((written,),) = self.dialect.select(step)
            if not written:
                self._refuse(batch)
            signals.announce(batch, self.using)
        else:
            waiting = self._commit_statements(batch, now, savepoint, [])
        if not batch.release_lease:
            return False
        # A run's last write gave the lease back: did answers arrive while it ran?
        finished = batch.invocation is not None and batch.invocation.status.is_final
        if finished:
            return False
        return waiting if waiting is not None else self._answers_waiting(batch.invocation_id)

    def commit_with_sync(self, batch: WriteBatch, also: Sequence[Checked]) -> None:
        """Write a batch that gives no lease back (answers) in the caller's transaction,
        which ends with any error, and then the caller's statements `also`, in the same
        round trip where the dialect pipelines (an answer's audit entry, its run's lease)."""
        self._commit_statements(batch, timezone.now(), False, list(also))

    def _commit_statements(
        self, batch: WriteBatch, now: Any, savepoint: bool, also: list[Checked]
    ) -> bool | None:
        """The batch in one transaction of several statements. Where the dialect pipelines
        they go in one round trip with, after a run's last write, the "answers waiting"
        read (a statement of its own, so it sees answers committed while the lease UPDATE
        waited; a later one queues on the invocation row until this commits); that read's
        result is returned (None when not made here)."""
        statements = self._batch_statements(batch, now) + also
        # Not pipelined when the UPDATE may find no invocation to create it first (an
        # engine Runner's first write): the statements after it need the row.
        pipelined = self.dialect.pipelines and (
            batch.lease_owner is not None or batch.invocation is None
        )
        finished = batch.invocation is not None and batch.invocation.status.is_final
        waiting: list[bool] = []
        if pipelined and batch.release_lease and not finished:
            query, params = sql.answers_waiting(self.dialect.pk(batch.invocation_id))
            statements.append((query, params, lambda c: waiting.append(bool(c.fetchall()))))
        with transaction.atomic(using=self.using, savepoint=savepoint):
            self.dialect.run_checked(statements, in_one_trip=pipelined)
            actions.apply(batch, self.using)
            signals.announce(batch, self.using)
        return waiting[0] if waiting else None

    def _batch_statements(self, batch: WriteBatch, now: Any) -> list[Checked]:
        """The batch's statements, each with the check of its result (it raises and so
        rolls the transaction back): the lease, pending resolutions, new interrupt ids."""
        pk, dialect = self.dialect.pk(batch.invocation_id), self.dialect
        checked: list[Checked] = []
        if batch.lease_owner is not None or batch.invocation is not None:

            def written(cursor: Any) -> None:
                if not cursor.rowcount:
                    self._refuse(batch)

            update = sql.invocation_update(batch, pk, now, self.lease_seconds, dialect)
            checked.append((*update, written))
        for resolution in batch.resolutions:
            check = partial(self._resolved, resolution.interrupt_id)
            checked.append((*sql.resolution_update(resolution, now, dialect), check))
        stamp = dialect.adapt_datetime(now)
        for part in sql.parts(batch.node_runs.items(), len(NODE_RUN_COLUMNS)):
            checked.append((*sql.node_run_upsert(pk, part, stamp), None))
        if batch.new_interrupts:
            checked += self._interrupt_inserts(batch.new_interrupts)
        for part in sql.parts(batch.events, len(EVENT_COLUMNS)):
            checked.append((*sql.event_insert(pk, part), None))
        if batch.consumed:
            checked.append((*sql.mark_consumed(sorted(batch.consumed)), None))
        if batch.deferred:
            checked.append((*sql.mark_deferred(sorted(batch.deferred)), None))
        return checked

    def _interrupt_inserts(self, records: list[InterruptRecord]) -> list[Checked]:
        """Insert the interrupt rows; the last check raises DuplicateInterruptError for an
        id held already (by any node run), and the transaction then writes nothing."""
        connection = connections[self.using]
        # A concrete field always has a column (the stubs allow None for other fields).
        columns = [cast(str, f.column) for f in inserted_fields(Interrupt)]
        inserted: set[str] = set()
        parts = sql.parts(records, len(columns))
        checked: list[Checked] = []
        for index, part in enumerate(parts):
            values = interrupt_insert_values(part, connection)

            def check(cursor: Any, last: bool = index == len(parts) - 1) -> None:
                inserted.update(r[0] for r in cursor.fetchall())
                taken = [r.id for r in records if r.id not in inserted]
                if last and taken:
                    held = Interrupt.objects.using(self.using).filter(pk=taken[0]).first()
                    path = held.path if held else "another node run"
                    raise DuplicateInterruptError(taken[0], path)

            checked.append((sql.interrupt_insert(columns, len(part)), values, check))
        return checked

    def _refuse(self, batch: WriteBatch) -> None:
        """The invocation UPDATE matched nothing: create a missing invocation, or say why."""
        status = (
            Invocation.objects.using(self.using)
            .filter(pk=batch.invocation_id)
            .values_list("status", flat=True)
            .first()
        )
        if status is None and batch.invocation is not None:
            self._create_invocation(batch.invocation)
        elif status == NodeStatus.CANCELLED:
            raise InvocationCancelledError(f"invocation {batch.invocation_id} was cancelled")
        elif status is not None and NodeStatus(status).is_final:
            raise InvocationFinishedError(f"invocation {batch.invocation_id} is {status}")
        else:
            raise LeaseLostError(f"invocation {batch.invocation_id} is leased to another run")

    def _create_invocation(self, record: InvocationRecord) -> None:
        """An invocation started by the engine's own Runner (services create theirs)."""
        session_id: str | uuid.UUID | None = record.session_id
        if session_id is None:
            session_id = Session.objects.using(self.using).create().pk
        Invocation.objects.using(self.using).create(
            id=record.id,
            session_id=session_id,
            workflow_name=record.workflow_name,
            workflow_version="",
            status=record.status,
            input=record.input,
        )

    def _resolved(self, interrupt_id: str, cursor: Any) -> None:
        """The check of a resolution: InterruptNotPendingError when it closed nothing."""
        if cursor.fetchall():
            return
        current = (
            Interrupt.objects.using(self.using)
            .filter(pk=interrupt_id)
            .values_list("status", flat=True)
            .first()
        )
        if current == InterruptStatus.SUPERSEDED:
            raise InterruptSupersededError(interrupt_id)
        raise InterruptNotPendingError(interrupt_id, current or "missing")

    async def commit_then_call(
        self, batch: WriteBatch, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A node's checkpoint and the start of its body, in one trip to this thread."""

        def commit_then_call() -> Any:
            self.commit_sync(batch)
            return func(*args, **kwargs)

        return await self._call(commit_then_call)

    async def run_sync(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Synchronous node code runs in the thread that owns the database connection, so
        node bodies may use the ORM (and share the caller's transaction)."""
        return await self._call(partial(func, *args, **kwargs))

    # -- the async protocol the engine awaits --------------------------------------------
    async def load_checkpoint(self, invocation_id: str) -> Checkpoint | None:
        return await self._call(self.load_checkpoint_sync, invocation_id)

    async def load_interrupts(self, ids: Iterable[str]) -> dict[str, InterruptRecord]:
        return await self._call(self.load_interrupts_sync, list(ids))

    async def load_events(self, invocation_id: str) -> list[Event]:
        return await self._call(self.load_events_sync, invocation_id)

    async def check_assignees(self, invocation_id: str, requests: list[RequestInput]) -> None:
        await self._call(self.check_assignees_sync, invocation_id, requests)

    async def load_outputs(self, invocation_id: str, parent_path: str) -> dict[str, Any]:
        return await self._call(self.load_outputs_sync, invocation_id, parent_path)

    async def commit(self, batch: WriteBatch) -> bool:
        return await self._call(self.commit_sync, batch)

    async def acquire_lease(self, invocation_id: str, owner: str, ttl: float) -> Checkpoint | None:
        return await self._call(self.acquire_lease_sync, invocation_id, owner, ttl)

    async def release_lease(self, invocation_id: str, owner: str) -> bool:
        return await self._call(self.release_lease_sync, invocation_id, owner)

    async def renew_lease(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """The heartbeat: on a connection of its own, in a thread of its own, so it
        renews the lease while a synchronous node body holds the caller's thread."""
        return await sync_to_async(self.renew_lease_apart, thread_sensitive=False)(
            invocation_id, owner, ttl
        )

    def renew_lease_apart(self, invocation_id: str, owner: str, ttl: float) -> bool | None:
        """renew_lease_sync from a thread other than the run's, closing its connection."""
        try:
            return self.renew_lease_sync(invocation_id, owner, ttl)
        finally:
            connections[self.using].close()

    async def _call(self, func: Any, *args: Any) -> Any:
        if self.inline:
            return outside_loop(func, *args)
        return await in_caller_thread(func, *args)
