"""Test settings: the project settings plus an SQLite alias, so the durable-store suite runs
on SQLite and, when DATABASE_URL points at PostgreSQL, on PostgreSQL in the same session."""

from hitl_site.settings import *  # noqa: F403
from hitl_site.settings import BASE_DIR, DATABASES

DATABASES["sqlite"] = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": BASE_DIR / "test-store.sqlite3",
    "TEST": {"NAME": None},  # in memory
}

POSTGRES_CONFIGURED = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
STORE_DATABASES = ["sqlite", "default"] if POSTGRES_CONFIGURED else ["sqlite"]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
