from django.apps import AppConfig


class ExtenderConfig(AppConfig):
    name = "extender"
    verbose_name = "Extender"
