"""Test settings: the project settings, tasks run in-process on commit, and, when
DATABASE_URL points at PostgreSQL, an extra SQLite alias so the durable-store suite runs
on both backends in one session."""

from hitl_site.settings import *  # noqa: F403
from hitl_site.settings import DATABASES

POSTGRES_CONFIGURED = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
if POSTGRES_CONFIGURED:
    DATABASES["sqlite"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    STORE_DATABASES = ["sqlite", "default"]
else:
    STORE_DATABASES = ["default"]

CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_URL = "memory://localhost/"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
