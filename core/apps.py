from django.apps import AppConfig


class PlatformConfig(AppConfig):
    name = "core"
    verbose_name = "Platform"
