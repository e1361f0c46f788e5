"""What psycopg is asked to send while a block runs: `with sent_statements() as sent:`
gives the (query text, parameters) of every cursor execute, in order."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg


@contextmanager
def sent_statements() -> Iterator[list[tuple[str, Any]]]:
    sent: list[tuple[str, Any]] = []
    execute = psycopg.Cursor.execute

    def recording(cursor, query, params=None, *args, **kwargs):
        sent.append((str(query), params))
        return execute(cursor, query, params, *args, **kwargs)

    psycopg.Cursor.execute = recording
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = execute
