from django.db import migrations, models


class Migration(migrations.Migration):
    """A personal entry may be made for one space (issue 26: memory in scope)."""

    dependencies = [("memory", "0001_initial")]

    operations = [
        migrations.RemoveConstraint(model_name="memoryentry", name="memory_scope_space"),
        migrations.AddConstraint(
            model_name="memoryentry",
            constraint=models.CheckConstraint(
                condition=models.Q(("scope", "personal"))
                | models.Q(("scope", "project"), ("space__isnull", False)),
                name="memory_project_space",
            ),
        ),
    ]
