from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
    verbose_name = "Policies"

    def ready(self) -> None:
        """Serve the inventory what it needs from this app (inventory.signals)."""
        from inventory.signals import cluster_deleting, register_assignment_reader
        from policies.assignment_services import delete_cluster_objects
        from policies.queries import cluster_assignment_specs

        register_assignment_reader(cluster_assignment_specs)
        from policies.gates import ungated

        # Deleting the cluster was the decision: its objects go without a proposal (weak=False:
        # the wrapper is held by nothing else).
        cluster_deleting.connect(
            ungated(delete_cluster_objects), dispatch_uid="policies-cluster-delete", weak=False
        )
