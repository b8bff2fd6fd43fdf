"""URL map. The extender's hot path does not come through here: ``portal.wsgi`` hands
``/extender/`` to the extender handler before Django's middleware stack."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
]
