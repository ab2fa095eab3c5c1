"""The answer log's stored subtrees (issue 33): the hash of every complete, aligned
subtree above the leaves, so tree heads and proofs read O(log n) rows. A record like the
log's other tables, with the triggers of 0004: no UPDATE, no DELETE, no TRUNCATE while rows
exist (the runtime role may only SELECT and INSERT them: core.embedded.RECORD_TABLES).

No data step: a log that exists before this migration gets its subtrees from its next
integration, which fills every missing one first (audit.log.log_integrate); until then a
proof computes a missing subtree from its leaves.

Raw SQL for the triggers on purpose, as in 0002 and 0004. No app code is imported.
"""

from django.db import migrations, models

TABLE = "audit_logsubtree"

FORWARD = f"""
CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION koinon_record_reject_truncate();
"""

REVERSE = "".join(
    f"DROP TRIGGER {TABLE}_no_{op} ON {TABLE};\n" for op in ("update", "delete", "truncate")
)


class Migration(migrations.Migration):
    dependencies = [("audit", "0005_answer_log")]

    operations = [
        migrations.CreateModel(
            name="LogSubtree",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("level", models.PositiveSmallIntegerField()),
                ("index", models.PositiveBigIntegerField()),
                ("hash", models.CharField(max_length=64)),
            ],
            options={
                "ordering": ["level", "index"],
                "constraints": [
                    models.UniqueConstraint(fields=("level", "index"), name="log_subtree_unique")
                ],
            },
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
