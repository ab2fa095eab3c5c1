"""A run's audit becomes a record (issue 48, item 2): one row per published generation,
never updated or deleted, like the stream events it sits beside. The runtime role may only
SELECT and INSERT it (core.embedded.RECORD_TABLES); the erasure function is the one thing
that rewrites its text (knowledge/migrations/0015_erasure_gate.py). A step timed after
sealing (the publication itself), which used to be written into the row, is a row of
`audit_auditstep`, a record too.

An existing audit row (one per run, every generation in a list) is split into a row per
generation. Raw SQL for the triggers on purpose, as in 0004. No app code is imported.
"""

import django.db.models.deletion
from django.db import migrations, models

RECORDS = ("audit_answeraudit", "audit_auditstep")

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


def split(apps, schema_editor) -> None:
    """Each audit's generations, one row each (the run's plan on every row)."""
    AnswerAudit = apps.get_model("audit", "AnswerAudit")
    for audit in AnswerAudit.objects.order_by("pk").iterator():
        generations = sorted(audit.generations or [], key=lambda g: g.get("number", 0))
        if not generations:
            audit.delete()
            continue
        first, *rest = generations
        audit.number, audit.generation, audit.created_at = first["number"], first, audit.updated_at
        audit.save(update_fields=["number", "generation", "created_at"])
        for generation in rest:
            AnswerAudit.objects.create(
                run_id=audit.run_id,
                number=generation["number"],
                plan=audit.plan,
                generation=generation,
                generations=[],
                memories_used=[],
                updated_at=audit.updated_at,
            )
    # The new rows' foreign-key checks now, not at commit: the table is altered next.
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def join(apps, schema_editor) -> None:
    """Back to one row per run, every generation in its list (steps after sealing in
    their generation's steps)."""
    AnswerAudit = apps.get_model("audit", "AnswerAudit")
    AuditStep = apps.get_model("audit", "AuditStep")
    later: dict = {}
    for step in AuditStep.objects.order_by("pk"):
        later.setdefault((step.run_id, step.generation), []).append(step.step)
    rows: dict = {}
    for audit in AnswerAudit.objects.order_by("run_id", "number"):
        generation = dict(audit.generation)
        generation["steps"] = [
            *generation.get("steps", []),
            *later.get((audit.run_id, audit.number), []),
        ]
        rows.setdefault(audit.run_id, []).append((audit, generation))
    for items in rows.values():
        keep = items[-1][0]
        keep.generations = [generation for _, generation in items]
        memories: list = []
        for _, generation in items:
            memories += [m for m in generation.get("memories", []) if m not in memories]
        keep.memories_used = memories
        keep.save(update_fields=["generations", "memories_used"])
        for audit, _ in items[:-1]:
            audit.delete()
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("answers", "0007_question_sets"),
        ("audit", "0006_log_subtree"),
    ]

    operations = [
        migrations.AlterField(
            model_name="answeraudit",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="audits",
                to="answers.answerrun",
            ),
        ),
        migrations.AddField(
            model_name="answeraudit",
            name="number",
            field=models.PositiveIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="answeraudit",
            name="generation",
            field=models.JSONField(default=dict),
        ),
        migrations.AddField(
            model_name="answeraudit",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True, null=True),
        ),
        migrations.CreateModel(
            name="AuditStep",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("generation", models.PositiveIntegerField()),
                ("step", models.JSONField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="answers.answerrun",
                    ),
                ),
            ],
            options={"ordering": ["run", "generation", "id"]},
        ),
        migrations.RunPython(split, join),
        migrations.RemoveField(model_name="answeraudit", name="generations"),
        migrations.RemoveField(model_name="answeraudit", name="memories_used"),
        migrations.RemoveField(model_name="answeraudit", name="updated_at"),
        migrations.AlterField(
            model_name="answeraudit",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True),
        ),
        migrations.AlterModelOptions(name="answeraudit", options={"ordering": ["run", "number"]}),
        migrations.AddConstraint(
            model_name="answeraudit",
            constraint=models.UniqueConstraint(
                fields=("run", "number"), name="answer_audit_unique"
            ),
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
