"""Cancel and retry follow one rule: `workflows.cancel_invocation` /
`workflows.retry_invocation` (or having started the invocation). The API used to let
holders of `workflows.change_invocation` cancel and retry any invocation; every user and
group holding it now gets both permissions, so nobody loses what they could do."""

from django.conf import settings
from django.db import migrations

GRANTED = {
    "cancel_invocation": "Can cancel invocations",
    "retry_invocation": "Can retry failed invocations",
}


def grant_cancel_and_retry(apps, schema_editor):
    permissions = apps.get_model("auth", "Permission")
    change = permissions.objects.filter(
        content_type__app_label="workflows",
        content_type__model="invocation",
        codename="change_invocation",
    ).first()
    if change is None:  # a fresh database: nobody holds it yet
        return
    # Created here when they do not exist yet (post_migrate creates them after migrating).
    granted = [
        permissions.objects.get_or_create(
            content_type_id=change.content_type_id, codename=codename, defaults={"name": name}
        )[0]
        for codename, name in GRANTED.items()
    ]
    users = apps.get_model(settings.AUTH_USER_MODEL)
    holders = [(apps.get_model("auth", "Group").permissions.through, "group_id")]
    if hasattr(users, "user_permissions"):  # a custom user model may have none
        holders.append((users.user_permissions.through, "user_id"))
    for through, holder in holders:
        holder_ids = through.objects.filter(permission=change).values_list(holder, flat=True)
        through.objects.bulk_create(
            [
                through(**{holder: holder_id, "permission_id": permission.pk})
                for holder_id in holder_ids
                for permission in granted
            ],
            ignore_conflicts=True,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0004_audit"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(grant_cancel_and_retry, migrations.RunPython.noop),
    ]
