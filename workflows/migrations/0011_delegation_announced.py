from django.db import migrations, models


def mark_the_announced(apps, schema_editor):
    # A delegation active when it was made was announced then; one made to start later
    # never was, so it stays unannounced and the sweep announces it if it is running.
    Delegation = apps.get_model("workflows", "Delegation")
    Delegation.objects.filter(starts_at__lte=models.F("created_at")).update(
        announced_at=models.F("created_at")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0010_inbox_order_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="delegation",
            name="announced_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(mark_the_announced, migrations.RunPython.noop),
    ]
