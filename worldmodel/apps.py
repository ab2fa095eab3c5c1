from django.apps import AppConfig

from answers.pipeline import hooks


class WorldModelConfig(AppConfig):
    name = "worldmodel"
    verbose_name = "World model"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Inside ready(): the services import the app's models, which load after the apps.
        from worldmodel import services

        hooks.world_claims_record.provide(services.world_claims_record)
