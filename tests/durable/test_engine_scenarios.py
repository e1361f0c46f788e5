"""The engine scenario suite again, through the database store: on SQLite, and on
PostgreSQL when DATABASE_URL points at it (CI sets it and requires it)."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core import serializers

from tests.engine import helpers
from tests.engine.test_definitions import *  # noqa: F403
from tests.engine.test_exactly_once import *  # noqa: F403
from tests.engine.test_failure import *  # noqa: F403
from tests.engine.test_graphs import *  # noqa: F403
from tests.engine.test_rerun_on_resume import *  # noqa: F403
from tests.engine.test_submissions import *  # noqa: F403
from tests.engine.test_values import *  # noqa: F403
from workflows.models import Interrupt, Invocation, NodeRun, Session, SessionEvent
from workflows.store import DjangoStore

pytestmark = pytest.mark.django_db(databases=settings.STORE_DATABASES)


class DatabaseBackend:
    def __init__(self, using: str) -> None:
        self.using = using

    def new_store(self) -> DjangoStore:
        return DjangoStore(using=self.using)

    def run(self, test: Any, *args: Any, **kwargs: Any) -> Any:
        # async_to_sync keeps the store's ORM calls on this thread, inside the test's
        # transaction.
        return async_to_sync(test)(*args, **kwargs)

    async def snapshot(self, store: DjangoStore) -> str:
        def dump() -> str:
            models = [Session, Invocation, NodeRun, SessionEvent, Interrupt]
            rows = [row for model in models for row in model.objects.using(self.using).all()]
            return serializers.serialize("json", rows)

        return await sync_to_async(dump)()


@pytest.fixture(autouse=True, params=settings.STORE_DATABASES)
def database_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(helpers, "BACKEND", DatabaseBackend(request.param))
    return request.param
