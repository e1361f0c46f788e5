"""Watching a thread wait on a row lock (PostgreSQL), for the tests of the locks that make
concurrent changes take turns: proof that the second change waited for the first."""

import threading
import time

from django.db import connection

WAITING_ON_A_LOCK = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
)


def waits_on_a_lock(thread: threading.Thread, timeout: float) -> bool:
    """True once some connection of this test's database waits on a lock while `thread`
    runs; False when `thread` ends first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while thread.is_alive() and time.monotonic() < deadline:
            cursor.execute(WAITING_ON_A_LOCK)
            if cursor.fetchone()[0] > 0:
                return True
    return False
