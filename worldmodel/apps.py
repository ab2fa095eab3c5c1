from django.apps import AppConfig


class WorldModelConfig(AppConfig):
    name = "worldmodel"
    verbose_name = "World model"
    default_auto_field = "django.db.models.BigAutoField"
