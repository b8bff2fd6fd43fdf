from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The project: settings, URLs, WSGI, Celery, the management commands and the admin's look.

    It has no models; its label is ``site`` because ``portal`` belongs to ``core`` (see there).
    """

    name = "portal"
    label = "site"
    verbose_name = "Site"
