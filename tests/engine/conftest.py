"""`store_backend`: where the engine scenarios keep their state. The scenario modules are
one conformance suite for stores: each of their tests runs once per backend, in memory,
then through the database store on SQLite and, when DATABASE_URL points at PostgreSQL,
on PostgreSQL (CI sets it and requires it)."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core import serializers
from django.db import connections

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
from workflows.store.actions import grant_record

from .helpers import InMemoryBackend


class DatabaseBackend:
    """The Django store on the database alias `using`, inside the test's transaction."""

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


BACKENDS = [
    pytest.param(None, id="memory"),
    *(
        pytest.param(
            alias, id=connections[alias].vendor, marks=pytest.mark.django_db(databases=[alias])
        )
        for alias in settings.STORE_DATABASES
    ),
]


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest) -> InMemoryBackend | DatabaseBackend:
    return InMemoryBackend() if request.param is None else DatabaseBackend(request.param)
