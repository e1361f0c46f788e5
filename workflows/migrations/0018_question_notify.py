"""The question feed's wake-up on PostgreSQL (DESIGN 4.5): a change of a question's status,
assignees, answerer or claim, and a decision recorded on it, send `NOTIFY hitl_stream,
'<invocation id>'` (the question's invocation's channel, as migration 0017 does for its
events), so an open decision page hears of it when the change commits. Other databases:
nothing (the feed polls)."""

from django.db import migrations

INSTALL = """
CREATE OR REPLACE FUNCTION hitl_stream_interrupt_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hitl_stream', NEW.invocation_id::text);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION hitl_stream_decision_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hitl_stream', invocation_id::text)
        FROM workflows_interrupt WHERE id = NEW.interrupt_id;
    RETURN NULL;
END $$;

CREATE TRIGGER hitl_stream_interrupt
    AFTER UPDATE OF status, assignees, resolved_by_id, claimed_by_id ON workflows_interrupt
    FOR EACH ROW WHEN (
        OLD.status IS DISTINCT FROM NEW.status
        OR OLD.assignees IS DISTINCT FROM NEW.assignees
        OR OLD.resolved_by_id IS DISTINCT FROM NEW.resolved_by_id
        OR OLD.claimed_by_id IS DISTINCT FROM NEW.claimed_by_id
    )
    EXECUTE FUNCTION hitl_stream_interrupt_notify();

CREATE TRIGGER hitl_stream_decision AFTER INSERT ON workflows_decision
    FOR EACH ROW EXECUTE FUNCTION hitl_stream_decision_notify();
"""

UNINSTALL = """
DROP TRIGGER IF EXISTS hitl_stream_interrupt ON workflows_interrupt;
DROP TRIGGER IF EXISTS hitl_stream_decision ON workflows_decision;
DROP FUNCTION IF EXISTS hitl_stream_interrupt_notify();
DROP FUNCTION IF EXISTS hitl_stream_decision_notify();
"""


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("workflows", "0017_stream_notify")]

    operations = [migrations.RunPython(_on_postgresql(INSTALL), _on_postgresql(UNINSTALL))]
