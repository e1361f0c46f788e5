"""Settings of this project's processes in the comparison: the demo project's, with every
table built straight from the models (as the test suite's --no-migrations does), so the
harness measures the models as they are, whatever the state of the migration files."""

import os

from hitl_site.settings import *  # noqa: F403
from hitl_site.settings import LOGGING


class _NoMigrations:
    def __contains__(self, app: str) -> bool:
        return True

    def __getitem__(self, app: str) -> None:
        return None


MIGRATION_MODULES = _NoMigrations()

# Celery's "Task ... succeeded" line per eager task is not part of what is compared.
LOGGING = {**LOGGING, "loggers": {**LOGGING.get("loggers", {}), "celery": {"level": "WARNING"}}}

# Celery's Django fixup closes the database connection before and after every task unless
# CELERY_DB_REUSE_MAX is set; scale.py measures throughput both ways.
CELERY_DB_REUSE_MAX = int(os.environ.get("HITL_BENCH_DB_REUSE_MAX", "0")) or None
