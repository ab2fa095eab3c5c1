"""Outside snapshots (issue 50, item 1): append-only like releases. The record functions are
knowledge's (0013, 0015): an UPDATE passes only inside the erasure path. Raw SQL for the
triggers on purpose, as in audit 0004."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

TABLE = "outside_snapshot"
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
    dependencies = [
        ("knowledge", "0016_document_origin"),
        ("outside", "0001_channels"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Snapshot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "channel_kind",
                    models.CharField(
                        choices=[
                            (
                                "retrieval_endpoint",
                                "Retrieval endpoint (OpenAI vector store search)",
                            ),
                            ("federated_rag", "Another koinon (federated search)"),
                            ("web_search", "Web search (SearxNG JSON API)"),
                            ("fetch_url", "Fetch URLs"),
                            ("mcp_search", "MCP server's search tool"),
                        ],
                        max_length=32,
                    ),
                ),
                ("channel_name", models.CharField(max_length=100)),
                ("url", models.CharField(blank=True, max_length=2000)),
                ("remote_document_id", models.CharField(blank=True, max_length=200)),
                ("remote_revision_id", models.CharField(blank=True, max_length=200)),
                ("remote_passage_id", models.CharField(blank=True, max_length=200)),
                ("remote_text_sha256", models.CharField(blank=True, max_length=64)),
                ("tool", models.CharField(blank=True, max_length=200)),
                ("content_type", models.CharField(blank=True, max_length=200)),
                ("sha256", models.CharField(max_length=64)),
                ("size", models.PositiveBigIntegerField()),
                ("fetched_at", models.DateTimeField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "channel",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="snapshots",
                        to="outside.channel",
                    ),
                ),
                (
                    "document",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="outside_snapshots",
                        to="knowledge.document",
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "revision",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="outside_snapshots",
                        to="knowledge.documentrevision",
                    ),
                ),
            ],
            options={
                "ordering": ["-id"],
                "indexes": [
                    models.Index(fields=["owner", "-fetched_at"], name="snapshot_owner_fetched")
                ],
            },
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
