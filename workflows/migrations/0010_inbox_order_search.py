"""The inbox at scale (DESIGN 4.3, issue 18): a priority rank the database keeps, an index
in the inbox's order, one on the due date, and on PostgreSQL a trigram index for the
search and a GIN index on the assignees (SQLite searches by scanning: slower, still
correct)."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import migrations, models

import workflows.engine.status
from workflows.inbox import statements


def postgresql_only(*sql: str) -> Callable[[Any, Any], None]:
    """Run `sql` on PostgreSQL; elsewhere nothing (no trigram index on SQLite)."""

    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for statement in sql:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0009_people"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="interrupt",
            name="priority_rank",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    models.When(priority="urgent", then=models.Value(0)),
                    models.When(priority="high", then=models.Value(1)),
                    models.When(priority="normal", then=models.Value(2)),
                    models.When(priority="low", then=models.Value(3)),
                    default=models.Value(2),
                ),
                output_field=models.PositiveSmallIntegerField(),
            ),
        ),
        migrations.AddIndex(
            model_name="interrupt",
            index=models.Index(
                fields=["priority_rank", "due_at", "created_at", "id"],
                condition=models.Q(("status", workflows.engine.status.InterruptStatus["PENDING"])),
                name="hitl_interrupt_inbox_order",
            ),
        ),
        migrations.AddIndex(
            model_name="interrupt",
            index=models.Index(
                condition=models.Q(
                    ("due_at__isnull", False),
                    ("status", workflows.engine.status.InterruptStatus["PENDING"]),
                ),
                fields=["due_at"],
                name="hitl_interrupt_due",
            ),
        ),
        migrations.RunPython(
            postgresql_only(
                statements.CREATE_TRIGRAM_EXTENSION,
                statements.CREATE_SEARCH_INDEX,
                statements.CREATE_ASSIGNEES_INDEX,
            ),
            postgresql_only(statements.DROP_SEARCH_INDEX, statements.DROP_ASSIGNEES_INDEX),
            elidable=False,
        ),
    ]
