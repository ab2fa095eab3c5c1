from django.apps import AppConfig


class OutsideConfig(AppConfig):
    name = "outside"
    verbose_name = "Outside evidence"
