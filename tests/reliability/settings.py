"""Settings of the worker processes the reliability tests start: the test project's worker
settings (tests/project/worker_settings.py) with the test workflows of
tests/reliability/workflows.py registered.

A test may pin its workers' lease length with the environment variable
HITL_TEST_LEASE_SECONDS (the worker inherits the test process's environment); without it
the workers run with the default."""

import os

from tests.project.worker_settings import *  # noqa: F403
from tests.project.worker_settings import HITL

HITL = {
    **HITL,
    "WORKFLOW_MODULES": [*HITL.get("WORKFLOW_MODULES", []), "tests.reliability.workflows"],
}
if os.environ.get("HITL_TEST_LEASE_SECONDS"):
    HITL["LEASE_SECONDS"] = float(os.environ["HITL_TEST_LEASE_SECONDS"])
