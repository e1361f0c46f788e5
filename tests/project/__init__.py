"""The library tests' own Django project: settings, urls, a Celery app and test workflows.

Nothing here imports the demo project (hitl_site); its own tests live in tests/hitl_site.
"""

from .celery import app as celery_app

__all__ = ("celery_app",)
