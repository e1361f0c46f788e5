# The audit trail keeps the RFC 8785 text each entry was hashed from; its append-only
# trigger becomes a plain one that no session setting switches off; passkey signatures
# carry a server nonce.

import django.db.models.deletion
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models

import workflows.models.passkeys

# pgtrigger's trigger function obeys `SET pgtrigger.ignore`: any role with UPDATE could
# switch it off for its session. This one reads no setting, and ENABLE ALWAYS keeps it
# firing under `session_replication_role = replica` too.
APPEND_ONLY = """
CREATE FUNCTION hitl_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit entries are append-only: % refused on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER hitl_audit_append_only BEFORE UPDATE OR DELETE ON workflows_auditentry
    FOR EACH ROW EXECUTE FUNCTION hitl_audit_append_only();
ALTER TABLE workflows_auditentry ENABLE ALWAYS TRIGGER hitl_audit_append_only;
"""
DROP_APPEND_ONLY = """
DROP TRIGGER IF EXISTS hitl_audit_append_only ON workflows_auditentry;
DROP FUNCTION IF EXISTS hitl_audit_append_only();
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0015_mcp_request_states"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(model_name="auditentry", name="audit_append_only"),
        migrations.RunPython(_on_postgresql(APPEND_ONLY), _on_postgresql(DROP_APPEND_ONLY)),
        migrations.AddField(
            model_name="auditentry",
            name="canonical_text",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.CreateModel(
            name="PasskeyChallenge",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("interrupt_id", models.CharField(max_length=255)),
                (
                    "nonce",
                    models.CharField(
                        default=workflows.models.passkeys.new_nonce,
                        editable=False,
                        max_length=64,
                        unique=True,
                    ),
                ),
                ("expires_at", models.DateTimeField()),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["user", "interrupt_id"], name="hitl_passkey_nonce")
                ],
            },
        ),
    ]
