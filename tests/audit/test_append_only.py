"""The table is append-only: on PostgreSQL the migration's trigger refuses UPDATE and
DELETE (from the ORM and from raw SQL alike); TRUNCATE is the one way past it, and
verifying against a kept checkpoint finds it."""

import functools
import io
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from tests.asking import ask
from tests.integration.worker import require_postgres
from workflows.audit import trail
from workflows.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "audit entries are append-only"


@pytest.fixture
def entry():
    require_postgres("the append-only trigger is PostgreSQL's")
    return trail.record("interrupt.claimed", interrupt=ask(), data={"n": 1})


def refused(statement) -> None:
    with pytest.raises(DatabaseError, match=REFUSED), transaction.atomic():
        statement()


def test_the_orm_cannot_update_or_delete_an_entry(entry):
    refused(lambda: AuditEntry.objects.filter(pk=entry.pk).update(data={"n": 2}))
    refused(lambda: AuditEntry.objects.filter(pk=entry.pk).delete())
    stored = AuditEntry.objects.get(pk=entry.pk)
    refused(lambda: stored.save())


def test_raw_sql_cannot_update_or_delete_an_entry(entry):
    table = AuditEntry._meta.db_table

    def execute(sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, [entry.pk])

    refused(lambda: execute(f"UPDATE {table} SET actor_name = 'mallory' WHERE id = %s"))
    refused(lambda: execute(f"DELETE FROM {table} WHERE id = %s"))
    assert AuditEntry.objects.get(pk=entry.pk).actor_name == ""
    assert trail.record("interrupt.released", invocation_id=entry.invocation_id).pk


def test_truncate_gets_past_the_trigger_and_verify_finds_it(entry, signing_key, tmp_path):
    kept = tmp_path / "checkpoint.json"
    out = io.StringIO()
    call_command("hitl_audit", "checkpoint", stdout=out)
    kept.write_text(out.getvalue())
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {AuditEntry._meta.db_table}")
    assert not AuditEntry.objects.exists()
    for args in ((), ("--checkpoint", str(kept))):
        with pytest.raises(CommandError) as raised:
            call_command("hitl_audit", "verify", *args, stdout=io.StringIO(), stderr=io.StringIO())
        assert entry.entry_hash in str(raised.value)


def test_no_session_setting_switches_the_trigger_off(entry):
    """pgtrigger's triggers obey `SET pgtrigger.ignore`; this one reads no setting, and
    `session_replication_role = replica` (which skips ordinary triggers) does not skip it.
    Tried as an application role that holds UPDATE and DELETE on the table."""
    table = AuditEntry._meta.db_table
    ignore = f"{table}:pgtrigger_audit_append_only_21aea"
    role = f"hitl_audit_test_{uuid.uuid4().hex[:12]}"  # roles are the cluster's: one of its own

    def as_the_application(*settings: str, statement: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE ROLE {role}")  # undone with the refused transaction
            cursor.execute(f"GRANT SELECT, UPDATE, DELETE ON {table} TO {role}")
            for setting in settings:
                cursor.execute(setting)
            cursor.execute(f"SET LOCAL ROLE {role}")
            cursor.execute(statement, [entry.pk])

    try:
        _each_setting_refused(as_the_application, ignore, table)
    finally:  # a trigger that gave way would have committed the role: drop it
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
            if cursor.fetchone():
                cursor.execute(f"DROP OWNED BY {role}")
                cursor.execute(f"DROP ROLE {role}")
    assert AuditEntry.objects.get(pk=entry.pk).actor_name == ""


def _each_setting_refused(as_the_application, ignore: str, table: str) -> None:
    for settings in (
        [f"SET LOCAL pgtrigger.ignore = '{ignore}'"],
        [f"SELECT set_config('pgtrigger.ignore', '{ignore}', true)"],
        [
            "SET LOCAL session_replication_role = replica",
            f"SET LOCAL pgtrigger.ignore = '{ignore}'",
        ],
    ):
        for statement in (
            f"UPDATE {table} SET actor_name = 'mallory' WHERE id = %s",
            f"DELETE FROM {table} WHERE id = %s",
        ):
            refused(functools.partial(as_the_application, *settings, statement=statement))
