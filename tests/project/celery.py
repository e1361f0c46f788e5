"""Celery app of the test project (`celery -A tests.project worker`, as the integration and
reliability tests start it)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")

app = Celery("tests.project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
