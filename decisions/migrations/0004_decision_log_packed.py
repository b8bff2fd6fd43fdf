"""The decision log's node sets packed into bytes, pod uids as uuid, 4-byte shape and policy-set
ids: ~390 bytes a decision with its indexes instead of ~710 (docs/architecture.md, "The decision
log"). Rows already logged are converted, not dropped."""

import json
import uuid

from django.db import migrations, models

import decisions.models
from core import packing

PACKED = (
    "candidates",
    "rejected_nodes",
    "rejected_reasons",
    "dry_nodes",
    "dry_reasons",
    "top_nodes",
    "top_scores",
)

# The node ids of packed bytes (core.packing), for the GIN index that finds
# the calls mentioning a node. Immutable: it reads nothing but its argument.
NODE_IDS_FUNCTION = """
CREATE OR REPLACE FUNCTION decision_node_ids(data bytea) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    result bigint[] := '{}';
    n integer := length(data);
    i integer := 0;
    b integer;
    shift integer;
    v bigint;
    previous bigint := 0;
BEGIN
    WHILE i < n LOOP
        v := 0;
        shift := 0;
        LOOP
            b := get_byte(data, i);
            i := i + 1;
            v := v | ((b & 127)::bigint << shift);
            EXIT WHEN b < 128 OR i >= n OR shift >= 56;
            shift := shift + 7;
        END LOOP;
        EXIT WHEN b >= 128;  -- a value cut short at the end
        previous := previous + ((v >> 1) # (-(v & 1)));
        result := result || previous;
    END LOOP;
    RETURN result;
END
$$
"""

# Only for converting the rows already logged; gone with the session.
PACK_FUNCTION = """
CREATE OR REPLACE FUNCTION pg_temp.decision_pack(ids integer[]) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    out bytea := '';
    previous bigint := 0;
    delta bigint;
    z bigint;
    x integer;
BEGIN
    FOREACH x IN ARRAY ids LOOP
        delta := x - previous;
        previous := x;
        z := CASE WHEN delta >= 0 THEN delta * 2 ELSE -delta * 2 - 1 END;
        WHILE z >= 128 LOOP
            out := out || set_byte('\\x00'::bytea, 0, ((z & 127) | 128)::integer);
            z := z >> 7;
        END LOOP;
        out := out || set_byte('\\x00'::bytea, 0, z::integer);
    END LOOP;
    RETURN out;
END
$$
"""

UUID_PATTERN = "^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"

NODES_INDEX = (
    "CREATE INDEX decision_nodes_gin ON extender_decision USING gin "
    "((decision_node_ids(rejected_nodes) || decision_node_ids(dry_nodes) "
    "|| decision_node_ids(top_nodes)))"
)


def postgresql_forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(NODE_IDS_FUNCTION)
    schema_editor.execute(PACK_FUNCTION)
    schema_editor.execute("DROP INDEX IF EXISTS decision_nodes_gin")
    changes = [
        f"ALTER COLUMN {column} DROP NOT NULL, ALTER COLUMN {column} TYPE bytea USING "
        f"CASE WHEN cardinality({column}) > 0 THEN pg_temp.decision_pack({column}) END"
        for column in PACKED
    ]
    changes.append(
        "ALTER COLUMN pod_uid DROP NOT NULL, ALTER COLUMN pod_uid TYPE uuid USING "
        f"CASE WHEN pod_uid ~ '{UUID_PATTERN}' THEN pod_uid::uuid END"
    )
    schema_editor.execute("ALTER TABLE extender_decision " + ", ".join(changes))
    schema_editor.execute(NODES_INDEX)


def postgresql_backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX IF EXISTS decision_nodes_gin")
    changes = [
        f"ALTER COLUMN {column} TYPE integer[] USING "
        f"COALESCE(decision_node_ids({column})::integer[], '{{}}'), "
        f"ALTER COLUMN {column} SET NOT NULL"
        for column in PACKED
    ]
    changes.append(
        "ALTER COLUMN pod_uid TYPE varchar(64) USING COALESCE(pod_uid::text, ''), "
        "ALTER COLUMN pod_uid SET NOT NULL"
    )
    schema_editor.execute("ALTER TABLE extender_decision " + ", ".join(changes))
    schema_editor.execute(
        "CREATE INDEX decision_nodes_gin ON extender_decision "
        "USING gin ((rejected_nodes || dry_nodes || top_nodes))"
    )
    schema_editor.execute("DROP FUNCTION decision_node_ids(bytea)")


def sqlite_unconvert(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        return
    columns = ", ".join(PACKED)
    assignments = ", ".join(f"{column} = %s" for column in PACKED)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, pod_uid, {columns} FROM extender_decision")
        for row_id, uid, *values in cursor.fetchall():
            lists = [json.dumps(packing.unpack(value)) for value in values]
            text = str(uuid.UUID(uid)) if uid else ""
            cursor.execute(
                f"UPDATE extender_decision SET pod_uid = %s, {assignments} WHERE id = %s",
                [text, *lists, row_id],
            )


def sqlite_convert(apps, schema_editor):
    """Off PostgreSQL the columns were changed by the AlterFields, their values copied as they
    were (JSON lists, uid text): packed and parsed here."""
    if schema_editor.connection.vendor == "postgresql":
        return
    columns = ", ".join(PACKED)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, pod_uid, {columns} FROM extender_decision")
        rows = cursor.fetchall()
        for row_id, uid, *values in rows:
            packed = []
            for value in values:
                if isinstance(value, str):
                    value = packing.pack(int(v) for v in json.loads(value or "[]"))
                packed.append(bytes(value) if value else None)
            try:
                uid_hex = uuid.UUID(uid).hex if uid else None
            except ValueError:
                uid_hex = None
            assignments = ", ".join(f"{column} = %s" for column in PACKED)
            cursor.execute(
                f"UPDATE extender_decision SET pod_uid = %s, {assignments} WHERE id = %s",
                [uid_hex, *packed, row_id],
            )


class AlterFieldElsewhere(migrations.AlterField):
    """The field's new state everywhere; its column changed by Django only off PostgreSQL (there
    ``postgresql_forwards`` changed it, converting the values in SQL)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("extender", "0003_decision_log_compact"),
    ]

    operations = [
        migrations.RunPython(postgresql_forwards, postgresql_backwards),
        *(
            AlterFieldElsewhere(
                model_name="decision", name=name, field=decisions.models.PackedIdsField()
            )
            for name in PACKED
        ),
        AlterFieldElsewhere(
            model_name="decision", name="pod_uid", field=models.UUIDField(blank=True, null=True)
        ),
        migrations.RunPython(sqlite_convert, sqlite_unconvert),
        migrations.AlterField(
            model_name="decisionpolicyset",
            name="id",
            field=models.AutoField(primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name="decisionshape",
            name="id",
            field=models.AutoField(primary_key=True, serialize=False),
        ),
    ]
