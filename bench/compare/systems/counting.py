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

        self.trace = trace
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


class StatementCounts:
    """What a process's database drivers are asked to do, counted while `active`:
    statements, the parameters adapted, and on PostgreSQL the round trips (a statement
    outside a pipeline, a pipeline, a COMMIT); on SQLite, every statement the library
    runs (BEGIN and COMMIT too), from its trace hook (`traced`)."""

    def __init__(self) -> None:
        self.executed = self.parameters = self.round_trips = self.traced = 0
        self.in_pipeline = False
        self.active = True

    def reset(self) -> None:
        self.executed = self.parameters = self.round_trips = self.traced = 0

    def count(self, params: Any) -> None:
        if self.active:
            self.executed += 1
            self.parameters += len(params or ())
            self.round_trips += not self.in_pipeline

    def watch_psycopg(self) -> None:
        """Count every psycopg cursor's statements, pipelines and commits."""
        import contextlib

        import psycopg

        execute, executemany, pipeline, commit = (
            psycopg.Cursor.execute,
            psycopg.Cursor.executemany,
            psycopg.Connection.pipeline,
            psycopg.Connection.commit,
        )
        counts = self

        def counted_execute(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            counts.count(params)
            return execute(cursor, query, params, **kwargs)

        def counted_executemany(cursor: Any, query: Any, rows: Any, **kwargs: Any) -> Any:
            rows = list(rows)
            # (psycopg pipelines the rows itself: one round trip for them all)
            outer, counts.in_pipeline = counts.in_pipeline, True
            for params in rows:
                counts.count(params)
            counts.round_trips += counts.active and not outer
            try:
                return executemany(cursor, query, rows, **kwargs)
            finally:
                counts.in_pipeline = outer

        @contextlib.contextmanager
        def counted_pipeline(connection: Any) -> Any:
            counts.round_trips += counts.active and not counts.in_pipeline
            outer, counts.in_pipeline = counts.in_pipeline, True
            try:
                with pipeline(connection) as p:
                    yield p
            finally:
                counts.in_pipeline = outer

        def counted_commit(connection: Any) -> None:
            counts.round_trips += counts.active
            commit(connection)

        psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
        psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign]
        psycopg.Connection.commit = counted_commit  # type: ignore[method-assign]

    def watch_sqlite(self, connection: Any, then: Any = None) -> None:
        """Count every statement an sqlite3 connection runs (`then`: a trace callback
        already set, called too)."""

        def traced(statement: str) -> None:
            self.traced += self.active
            if then is not None:
                then(statement)

        connection.set_trace_callback(traced)
