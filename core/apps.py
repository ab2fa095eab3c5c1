from django.apps import AppConfig


class PlatformConfig(AppConfig):
    name = "core"
    verbose_name = "Platform"

    def ready(self) -> None:
        from core import schema  # noqa: F401 (registers the OpenAPI authentication extension)
