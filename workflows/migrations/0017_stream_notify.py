"""The live stream's wake-up on PostgreSQL (DESIGN 4.5): a new session event, and a change of
an invocation's status or of its lease's holder (a run taking or giving it back: when an
AG-UI run stops), send `NOTIFY hitl_stream, '<invocation id>'` in the transaction that
writes them, so the listening streams hear of it when (and only if) it commits. Every
writer (the store's one-statement step, its PL/pgSQL function, the services) is covered
without a statement of its own; PostgreSQL sends one notification per invocation and
transaction however many events it wrote. Other databases: nothing (their streams poll)."""

from django.db import migrations

INSTALL = """
CREATE OR REPLACE FUNCTION hitl_stream_event_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hitl_stream', NEW.invocation_id::text);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION hitl_stream_status_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hitl_stream', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER hitl_stream_event AFTER INSERT ON workflows_sessionevent
    FOR EACH ROW EXECUTE FUNCTION hitl_stream_event_notify();

CREATE TRIGGER hitl_stream_status AFTER UPDATE OF status, lease_owner ON workflows_invocation
    FOR EACH ROW WHEN (
        OLD.status IS DISTINCT FROM NEW.status OR OLD.lease_owner IS DISTINCT FROM NEW.lease_owner
    )
    EXECUTE FUNCTION hitl_stream_status_notify();
"""

UNINSTALL = """
DROP TRIGGER IF EXISTS hitl_stream_event ON workflows_sessionevent;
DROP TRIGGER IF EXISTS hitl_stream_status ON workflows_invocation;
DROP FUNCTION IF EXISTS hitl_stream_event_notify();
DROP FUNCTION IF EXISTS hitl_stream_status_notify();
"""


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("workflows", "0016_audit_canonical_text")]

    operations = [migrations.RunPython(_on_postgresql(INSTALL), _on_postgresql(UNINSTALL))]
