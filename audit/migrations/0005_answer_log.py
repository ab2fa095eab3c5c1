"""The answer log (issue 33): one entry per output release at a dense index, and the
signed checkpoints of its Merkle tree. Both are records, with the triggers of 0004: no
UPDATE, no DELETE, no TRUNCATE while rows exist (the runtime role may only SELECT and
INSERT them: core.embedded.RECORD_TABLES).

Raw SQL for the triggers on purpose, as in 0002 and 0004. No app code is imported.
"""

from django.db import migrations, models

RECORDS = ("audit_logentry", "audit_logcheckpoint")

FORWARD = ""
for table in RECORDS:
    FORWARD += f"""
CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION koinon_record_reject_truncate();
"""

REVERSE = "".join(
    f"DROP TRIGGER {table}_no_{op} ON {table};\n"
    for table in RECORDS
    for op in ("update", "delete", "truncate")
)


class Migration(migrations.Migration):
    dependencies = [("audit", "0004_append_only_records")]

    operations = [
        migrations.CreateModel(
            name="LogEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("index", models.PositiveBigIntegerField(unique=True)),
                ("entry", models.TextField()),
                ("leaf_hash", models.CharField(max_length=64)),
                ("integrated_at", models.DateTimeField(auto_now_add=True)),
                (
                    "release",
                    models.OneToOneField(
                        on_delete=models.deletion.PROTECT,
                        related_name="log_entry",
                        to="audit.outputrelease",
                    ),
                ),
            ],
            options={"ordering": ["index"]},
        ),
        migrations.CreateModel(
            name="LogCheckpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("size", models.PositiveBigIntegerField(unique=True)),
                ("root_hash", models.CharField(max_length=64)),
                ("note", models.TextField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["size"], "get_latest_by": "size"},
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
