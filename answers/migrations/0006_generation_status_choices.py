from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("answers", "0005_conversation_origin"),
    ]

    operations = [
        migrations.AlterField(
            model_name="generation",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("executing", "Executing"),
                    ("published", "Published"),
                    ("failed", "Failed"),
                ],
                default="running",
                max_length=16,
            ),
        ),
    ]
