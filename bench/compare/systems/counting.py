"""Commits as the database counts them: PostgreSQL's pg_stat_database.xact_commit of the
system's own database, SQLite's statements seen by a trace callback on the connection."""

from __future__ import annotations

from typing import Any

# Statements that are not a transaction of their own when run outside one.
OUTSIDE = ("BEGIN", "ROLLBACK", "SAVEPOIN", "RELEASE", "PRAGMA")


class SqliteCommits:
    """Transactions a sqlite3 connection ended with COMMIT, plus statements run outside
    a transaction (each is a transaction of its own), seen by sqlite's trace hook."""

    def __init__(self) -> None:
        self.count = 0
        self.statements: list[str] | None = None  # a list: every statement is added to it

    def attach(self, connection: Any) -> None:
        def trace(statement: str) -> None:
            if self.statements is not None:
                self.statements.append(statement)
            head = statement.lstrip()[:8].upper()
            if head.startswith(("COMMIT", "END")) or (
                not head.startswith(OUTSIDE) and not connection.in_transaction
            ):
                self.count += 1

        connection.set_trace_callback(trace)


class PostgresCommits:
    """xact_commit of one database, read on a connection to another database (so reading
    adds nothing), after the system's own connections flushed their statistics."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.database = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        observer = psycopg.conninfo.make_conninfo(url, dbname="postgres")
        self.observer = psycopg.connect(observer, autocommit=True)

    def read(self, flush: list[Any]) -> int:
        """`flush`: callables that each run one statement on one of the system's
        connections; each flush is a transaction, subtracted here."""
        for run in flush:
            run("SELECT pg_stat_force_next_flush()")
        with self.observer.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [self.database]
            )
            (count,) = cursor.fetchone()
        return count - self.flushes(len(flush))

    def flushes(self, per_read: int) -> int:
        self._flushes = getattr(self, "_flushes", 0) + per_read
        return self._flushes
