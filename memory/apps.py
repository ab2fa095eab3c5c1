from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from answers.pipeline import hooks
        from memory.services import memory_recheck, plan_steer

        hooks.plan_steer.provide(plan_steer)
        hooks.memory_recheck.provide(memory_recheck)
