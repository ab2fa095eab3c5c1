from django.db import migrations, models


class Migration(migrations.Migration):
    """What each release searched for (issue 26). Adding a column fires no row trigger:
    the receipts stay append-only, earlier ones read an empty record."""

    dependencies = [("audit", "0002_answer_release")]

    operations = [
        migrations.AddField(
            model_name="outputrelease",
            name="searched",
            field=models.JSONField(default=dict),
        ),
    ]
