"""How every write runs: in one database transaction, tried again when the database reports
a conflict that a retry resolves, through a store configured by the HITL settings."""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.db import OperationalError, connection, transaction

from .conf import hitl_settings
from .engine.errors import InvocationNotFoundError
from .store import DjangoStore

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# Conflicts a write transaction may meet and that succeed when tried again: PostgreSQL's
# deadlock, serialization and lock-timeout errors, and SQLite's busy database.
RETRYABLE_SQLSTATES = {"40P01", "40001", "55P03"}
WRITE_ATTEMPTS = 8


def store() -> DjangoStore:
    return DjangoStore(lease_seconds=hitl_settings.LEASE_SECONDS)


def retryable(error: OperationalError) -> bool:
    """Whether `error` is a conflict that trying the transaction again resolves."""
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in RETRYABLE_SQLSTATES:
        return True
    return connection.vendor == "sqlite" and "locked" in str(error)


def write_transaction(func: Callable[P, R]) -> Callable[P, R]:
    """Run `func` in one transaction, tried again (up to WRITE_ATTEMPTS times, with a short
    random pause) when the database reports a conflict that a retry resolves. Inside a
    caller's transaction it runs once, in a savepoint: only the outermost can retry."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            with transaction.atomic():
                return func(*args, **kwargs)
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except OperationalError as error:
                if attempt == WRITE_ATTEMPTS or not retryable(error):
                    raise
                logger.info("%s: %s; trying again (%d)", func.__name__, error, attempt)
                time.sleep(random.uniform(0, min(0.02 * 2**attempt, 1.0)))
        raise AssertionError("unreachable")

    return wrapper


def locked_checkpoint(db: DjangoStore, invocation: Any) -> Any:
    """The checkpoint of `invocation` (a model or its id), its row locked for this
    transaction; InvocationNotFoundError when there is none."""
    invocation_id = getattr(invocation, "pk", invocation)
    try:
        uuid.UUID(str(invocation_id))
    except ValueError:  # not an invocation id at all: none has it, the query is not sent
        raise InvocationNotFoundError(invocation_id) from None
    checkpoint = db.load_checkpoint_sync(str(invocation_id), lock=True)
    if checkpoint is None:
        raise InvocationNotFoundError(invocation_id)
    return checkpoint
