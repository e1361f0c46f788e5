"""Celery application of the demo/dev project (`celery -A hitl_site worker`)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

app = Celery("hitl_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
