"""The engine scenario suite again, through the database store: on SQLite, and on
PostgreSQL when DATABASE_URL points at it (CI sets it and requires it)."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core import serializers

from tests.engine import helpers
from tests.engine.test_definitions import *  # noqa: F403
from tests.engine.test_effects import *  # noqa: F403
from tests.engine.test_exactly_once import *  # noqa: F403
from tests.engine.test_failure import *  # noqa: F403
from tests.engine.test_gates import *  # noqa: F403
from tests.engine.test_grants import *  # noqa: F403
from tests.engine.test_graphs import *  # noqa: F403
from tests.engine.test_rerun_on_resume import *  # noqa: F403
from tests.engine.test_submissions import *  # noqa: F403
from tests.engine.test_values import *  # noqa: F403
from workflows.engine.state import GrantUse as GrantUseRecord
from workflows.models import (
    Effect,
    Grant,
    GrantUse,
    Interrupt,
    Invocation,
    NodeRun,
    Session,
    SessionEvent,
)
from workflows.store import DjangoStore
from workflows.store_actions import grant_record

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
            models += [Grant, GrantUse, Effect]
            rows = [row for model in models for row in model.objects.using(self.using).all()]
            return serializers.serialize("json", rows)

        return await sync_to_async(dump)()

    async def grants(self, store: DjangoStore) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            return {g.pk: grant_record(g) for g in Grant.objects.using(self.using).all()}

        return await sync_to_async(read)()

    async def new_session(self, store: DjangoStore) -> str:
        def create() -> str:
            return str(Session.objects.using(self.using).create().pk)

        return await sync_to_async(create)()

    async def grant_uses(self, store: DjangoStore) -> list[Any]:
        def read() -> list[Any]:
            uses = GrantUse.objects.using(self.using).order_by("used_at", "id")
            return [
                GrantUseRecord(u.grant_id, str(u.invocation_id), u.path, u.used_at) for u in uses
            ]

        return await sync_to_async(read)()


@pytest.fixture(autouse=True, params=settings.STORE_DATABASES)
def database_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(helpers, "BACKEND", DatabaseBackend(request.param))
    return request.param
