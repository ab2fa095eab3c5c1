"""Conversations say where they were started (the chat lists its own by default) and may
be deleted by their owner. Existing ones: asked through an API key → `api`; asked without
one (the chat's session) → `chat`; never asked in → `api` (POST /v1/conversations)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("answers", "0004_generation_recovery"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="origin",
            field=models.CharField(
                choices=[
                    ("chat", "chat"),
                    ("api", "API"),
                    ("client", "client"),
                    ("mcp", "MCP"),
                    ("cli", "command line"),
                ],
                default="api",
                max_length=8,
            ),
        ),
        migrations.RunSQL(
            """
            UPDATE answers_conversation c SET origin = 'chat'
            WHERE EXISTS (SELECT 1 FROM answers_answerrun r WHERE r.conversation_id = c.id)
              AND NOT EXISTS (SELECT 1 FROM answers_answerrun r
                              WHERE r.conversation_id = c.id AND r.api_key_id IS NOT NULL)
            """,
            migrations.RunSQL.noop,
        ),
    ]
