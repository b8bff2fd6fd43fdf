"""Admin additions owned by the inventory sync work: import upload, drift, push labels.

``inventory.admin`` mixes these classes into the Cluster and Node admins.
"""

from django.contrib import admin


class ClusterAdminExtras(admin.ModelAdmin):
    pass


class NodeAdminExtras(admin.ModelAdmin):
    pass
