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

from workflows.models import Interrupt, Invocation, NodeRun, Session, SessionEvent
from workflows.store import DjangoStore

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
            rows = [row for model in models for row in model.objects.using(self.using).all()]
            return serializers.serialize("json", rows)

        return await sync_to_async(dump)()


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
