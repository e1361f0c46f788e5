"""Settings of the worker processes tests/integration/test_worker_connections.py starts:
the test project's worker settings with the database at Django's default CONN_MAX_AGE (0,
what a project that sets nothing has), and the workflow of connection_workflows.py.

HITL_TEST_WORKER_CONN_MAX_AGE pins the worker's HITL["WORKER_CONN_MAX_AGE"] (the worker
inherits the test process's environment); without it the worker runs with the default."""

import os

from tests.project.worker_settings import *  # noqa: F403
from tests.project.worker_settings import DATABASES, HITL

DATABASES = {"default": {**DATABASES["default"], "CONN_MAX_AGE": 0}}
HITL = {
    **HITL,
    "WORKFLOW_MODULES": [*HITL["WORKFLOW_MODULES"], "tests.integration.connection_workflows"],
}
if os.environ.get("HITL_TEST_WORKER_CONN_MAX_AGE"):
    HITL = {**HITL, "WORKER_CONN_MAX_AGE": float(os.environ["HITL_TEST_WORKER_CONN_MAX_AGE"])}
