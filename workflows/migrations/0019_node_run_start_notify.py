"""The live stream hears a node run start on PostgreSQL (DESIGN 4.5): a node run written as
RUNNING (a new run, a retry's next attempt, a rerun) sends `NOTIFY hitl_stream, '<invocation
id>'` as migration 0017 does for session events. A node that commits its start alone (its
`checkpoint_before_run`) writes no session event, so without this its stream would learn of
the start only at the next keep-alive. Other databases: nothing (their streams poll)."""

from django.db import migrations

INSTALL = """
CREATE TRIGGER hitl_stream_node_run AFTER INSERT OR UPDATE OF status, attempt, run_id
    ON workflows_noderun
    FOR EACH ROW WHEN (NEW.status = 'RUNNING')
    EXECUTE FUNCTION hitl_stream_event_notify();
"""

UNINSTALL = "DROP TRIGGER IF EXISTS hitl_stream_node_run ON workflows_noderun;"


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("workflows", "0018_question_notify")]

    operations = [migrations.RunPython(_on_postgresql(INSTALL), _on_postgresql(UNINSTALL))]
