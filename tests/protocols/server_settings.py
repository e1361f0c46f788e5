"""Settings of the uvicorn processes the protocol tests start (tests/protocols/server.py):
the test project's, with the asking workflow registered, tasks sent to a real broker when
CELERY_BROKER_URL is set (a worker process runs them), and the stream's limits from the
environment."""

import os

from tests.project.settings import *  # noqa: F403
from tests.project.settings import HITL

if os.environ.get("CELERY_BROKER_URL"):
    CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
    CELERY_TASK_ALWAYS_EAGER = False

HITL = {
    **HITL,
    "WORKFLOW_MODULES": [*HITL["WORKFLOW_MODULES"], "tests.asking", "tests.protocols.agents"],
    "STREAM_KEEPALIVE_SECONDS": float(os.environ.get("HITL_STREAM_KEEPALIVE_SECONDS", "15")),
    "STREAM_MAX_CLIENTS": int(os.environ.get("HITL_STREAM_MAX_CLIENTS", "1000")),
}
