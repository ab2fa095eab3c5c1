from django.apps import AppConfig


class WorldModelConfig(AppConfig):
    name = "worldmodel"
    verbose_name = "World model"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from answers.pipeline import hooks
        from worldmodel.services import world_claims_record

        hooks.world_claims_record.provide(world_claims_record)
