"""Settings of the `celery -A tests.project worker` processes the integration tests start
(tests/integration/worker.py): the test project's, with tasks sent to the broker in
CELERY_BROKER_URL (the worker's environment) instead of run in-process."""

import os

from .settings import *  # noqa: F403

CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
CELERY_TASK_ALWAYS_EAGER = False
