from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_roles(apps, schema_editor):
    # Permissions are normally created after all migrations ran; create them now so the
    # groups can be granted them in this migration.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    from core.roles import sync_roles

    sync_roles(apps)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "editor", "admin"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0001_initial"),
        ("inventory", "0001_initial"),
        ("policies", "0001_initial"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
