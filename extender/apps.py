"""The kube-scheduler runtime's Django app (its management commands: ``serve_extender``).

Its label is ``extender_runtime``, not ``extender``: the label ``extender`` belongs to the
decision log (``decisions/apps.py``), whose tables, migrations, content types and permissions
were created under it while the log lived in this package. This app has no models; the label
only has to differ from every other.
"""

from django.apps import AppConfig


class ExtenderConfig(AppConfig):
    name = "extender"
    label = "extender_runtime"  # "extender" is the decision log's: see the module's docstring
    verbose_name = "Extender"
