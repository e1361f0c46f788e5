"""Settings of this project's processes in the comparison: the demo project's, with every
table built straight from the models (as the test suite's --no-migrations does), so the
harness measures the models as they are, whatever the state of the migration files."""

import os

from hitl_site.settings import *  # noqa: F403
from hitl_site.settings import HITL, LOGGING


class _NoMigrations:
    def __contains__(self, app: str) -> bool:
        return True

    def __getitem__(self, app: str) -> None:
        return None


MIGRATION_MODULES = _NoMigrations()

# Celery's "Task ... succeeded" line per eager task is not part of what is compared.
LOGGING = {**LOGGING, "loggers": {**LOGGING.get("loggers", {}), "celery": {"level": "WARNING"}}}

# A worker keeps its database connections between tasks (HITL["WORKER_CONN_MAX_AGE"]);
# HITL_BENCH_WORKER_CONN_MAX_AGE=0 gives Celery's new connection per task back, so that
# scale.py and capacity.py measure throughput both ways.
if os.environ.get("HITL_BENCH_WORKER_CONN_MAX_AGE"):
    HITL = {**HITL, "WORKER_CONN_MAX_AGE": float(os.environ["HITL_BENCH_WORKER_CONN_MAX_AGE"])}
