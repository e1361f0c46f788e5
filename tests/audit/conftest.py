"""Helpers of the audit trail tests: a signing key, tampering with raw SQL (what a
database owner can do), and reading the trail back."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings as django_settings
from django.db import connection, transaction

from workflows.models import AuditEntry


def private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


@pytest.fixture
def signing_key(settings: Any) -> Iterator[Ed25519PrivateKey]:
    """HITL["AUDIT_SIGNING_KEY"] set to a fresh Ed25519 key (returned)."""
    key = Ed25519PrivateKey.generate()
    settings.HITL = {**django_settings.HITL, "AUDIT_SIGNING_KEY": private_pem(key)}
    yield key


APPEND_ONLY = f"{AuditEntry._meta.db_table} {{}} TRIGGER hitl_audit_append_only"


def tamper(sql: str, params: list[Any] | None = None) -> int:
    """Run `sql` as the database's owner would, past the append-only trigger (PostgreSQL:
    the table's owner disables it for the transaction, which no session setting does);
    the rows it changed."""
    with transaction.atomic(), connection.cursor() as cursor:
        postgres = connection.vendor == "postgresql"
        if postgres:
            cursor.execute("ALTER TABLE " + APPEND_ONLY.format("DISABLE"))
        cursor.execute(sql, params or [])
        changed = cursor.rowcount
        if postgres:  # (foreign keys checked now: no ALTER with trigger events pending)
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE " + APPEND_ONLY.format("ENABLE ALWAYS"))
        return changed


@pytest.fixture
def raw_sql() -> Callable[..., int]:
    return tamper


def entries(**filters: Any) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(**filters).order_by("id"))


def actions(**filters: Any) -> list[str]:
    return [entry.action for entry in entries(**filters)]
