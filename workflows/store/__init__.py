"""The engine's store on the Django ORM.

- rows.py: the tables and columns the store reads and writes, the value codecs, and the
  pure functions that map rows to the engine's records and back;
- statements.py: the portable SQL, as builders returning `(sql, params)`;
- dialect.py: how any Django database runs them; postgresql.py and sqlite.py: what
  differs on those two (cursor, locking clause, clock, pipelining, the one-statement
  step, the execution read);
- threads.py: where the synchronous code runs, and the lease keep-alive thread;
- leases.py: a lease handed from the transaction that gave work to the run that executes
  it in this thread;
- django_store.py: `DjangoStore`, the Store protocol on those.
"""

from .django_store import DjangoStore
from .rows import (
    ANSWERED,
    event_from_row,
    interrupt_record,
    interrupt_row,
    invocation_record,
    node_run_state,
)

__all__ = [
    "ANSWERED",
    "DjangoStore",
    "event_from_row",
    "interrupt_record",
    "interrupt_row",
    "invocation_record",
    "node_run_state",
]
