"""The inbox at scale (issue 18): the "claimed by me" view in the inbox's order, so that
one person's page is read from an index rather than picked out of a walk of every
pending question (130 ms of SQL at 1,000,000, now under 1 ms)."""

from django.conf import settings
from django.db import migrations, models

import workflows.engine.status


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0011_delegation_announced"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="interrupt",
            index=models.Index(
                condition=models.Q(("status", workflows.engine.status.InterruptStatus["PENDING"])),
                fields=["claimed_by", "priority_rank", "due_at", "created_at", "id"],
                name="hitl_interrupt_claimed_order",
            ),
        ),
    ]
