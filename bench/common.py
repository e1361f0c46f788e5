"""What every benchmark here shares: the percentile they report, the machine they ran on,
progress lines on stderr (the tables go to stdout), a fresh database to seed, and a store
that counts its reads and commits (the engine tests count them too)."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile: the smallest sample at or above `pct` percent of them."""
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_facts() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
    }


def machine(*more: str) -> str:
    """One line naming the machine, then `more` facts (database and broker versions)."""
    facts = machine_facts()
    parts = [
        f"machine: {facts['platform']}",
        f"Python {facts['python']} ({facts['implementation']})",
        f"CPU: {facts['cpu']}",
        f"cores: {facts['cores']}",
        *more,
    ]
    return " | ".join(parts)


def postgres_version() -> str:
    """The version of the PostgreSQL server behind Django's default connection."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    return f"PostgreSQL {version}"


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def build_database(*, migrate: bool = False) -> str:
    """A fresh database named as the settings name it, its tables made from the models
    (or by the migrations, with the PostgreSQL-only indexes they add); returns its name."""
    from django.db import connection

    name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"].update(NAME=name, MIGRATE=migrate)
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return name


class CountingStore:
    """A store that counts the commits and the reads it is asked for."""

    COMMITS = ("commit", "commit_then_call", "commit_sync")

    def __init__(self, store: Any) -> None:
        self._store = store
        self.commits = 0
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name in self.COMMITS:

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.commits += 1
                return attribute(*args, **kwargs)

            return counted
        if name.startswith(("load_", "find_")):
            self.reads += 1
        return attribute
