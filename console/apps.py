from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The operator console: the admin's landing dashboard (docs/architecture.md)."""

    name = "console"
    verbose_name = "Console"
