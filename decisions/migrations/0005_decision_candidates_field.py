# The candidates column keeps its bytes (bytea, BLOB on SQLite): only the field class reading
# them changes (decisions.models.CandidatesField), so the database is left as it is.

from django.db import migrations

import decisions.models


class Migration(migrations.Migration):
    dependencies = [
        ("extender", "0004_decision_log_packed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="decision",
                    name="candidates",
                    field=decisions.models.CandidatesField(),
                ),
            ],
        ),
    ]
