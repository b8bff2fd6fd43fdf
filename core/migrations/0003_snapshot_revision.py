from django.db import migrations


def create_row(apps, schema_editor):
    apps.get_model("portal", "Revision").objects.get_or_create(
        name="snapshot", defaults={"value": 1}
    )


class Migration(migrations.Migration):
    dependencies = [("portal", "0002_roles")]

    operations = [migrations.RunPython(create_row, migrations.RunPython.noop)]
