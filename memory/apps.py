from django.apps import AppConfig

from answers.pipeline import hooks


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Inside ready(): the services import the app's models, which load after the apps.
        from memory import services

        hooks.plan_steer.provide(services.plan_steer)
        hooks.memory_recheck.provide(services.memory_recheck)
