"""`after_each_entry(monkeypatch, then)`: call `then(action, kwargs)` right after each audit
entry is written, in its transaction, whichever way it is written: by `trail.record`, or
(on PostgreSQL) as the statement `trail.appending` gives the answer path, once that
statement ran. A `then` that raises fails the write; one that waits holds its transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflows.audit import trail


def after_each_entry(monkeypatch: Any, then: Callable[[str, dict[str, Any]], None]) -> None:
    record, appending = trail.record, trail.appending

    def record_then(action: str, **kwargs: Any) -> Any:
        entry = record(action, **kwargs)
        then(action, kwargs)
        return entry

    def appending_then(action: str, **kwargs: Any) -> Any:
        found = appending(action, **kwargs)
        if found is None:
            return None
        entry, (sql, params, check) = found

        def check_then(cursor: Any) -> None:
            check(cursor)
            then(action, kwargs)

        return entry, (sql, params, check_then)

    monkeypatch.setattr(trail, "record", record_then)
    monkeypatch.setattr(trail, "appending", appending_then)
