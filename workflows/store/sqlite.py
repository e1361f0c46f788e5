"""The store on SQLite: what differs from the portable dialect is the cursor.

Everything else is the portable dialect's: one statement at a time (an embedded database
has no round trip to save), times passed as parameters (its clock is this machine's), no
row locks (a write transaction holds the whole database)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from django.db import connections

from .dialect import Dialect


@functools.lru_cache(maxsize=512)
def _qmarks(sql: str) -> str:
    """The store's SQL (format-style marks, as Django's cursors take) in sqlite3's style."""
    return sql.replace("%s", "?")


class _QmarkCursor:
    """An sqlite3 cursor that takes the store's format-style marks."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = ()) -> None:
        self._cursor.execute(_qmarks(sql), params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class SQLiteDialect(Dialect):
    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        """sqlite3's own cursor (through Django's a node transition takes 1.07 instead of
        0.77 million instructions: docs/performance.md, "The store's choices, measured");
        errors raised as Django's."""
        raw_connection = self.raw_connection()
        with connections[self.using].wrap_database_errors:
            cursor = _QmarkCursor(raw_connection.cursor())
            try:
                yield cursor
            finally:
                cursor.close()

    def locking(self, sql: str) -> str:
        return sql
