"""Eviction is its own grant: the ``evictor`` group holds ``inventory.evict_pod``, and the
``editor`` role no longer does (core/roles.py). Editors who evicted before must be added to
``evictor`` by an administrator; admins keep the permission."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

PERMISSION = ("inventory", "evict_pod")


def evict_is_a_grant(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    from core.roles import sync_roles

    sync_roles(apps)
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    evict = permission_model.objects.filter(
        content_type__app_label=PERMISSION[0], codename=PERMISSION[1]
    )
    for editor in group_model.objects.filter(name="editor"):
        editor.permissions.remove(*evict)


def editors_evict_again(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    evict = permission_model.objects.filter(
        content_type__app_label=PERMISSION[0], codename=PERMISSION[1]
    )
    for editor in group_model.objects.filter(name="editor"):
        editor.permissions.add(*evict)
    group_model.objects.filter(name="evictor").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0006_audit_evict_requeue"),
        ("inventory", "0005_pods"),
    ]

    operations = [migrations.RunPython(evict_is_a_grant, editors_evict_again)]
