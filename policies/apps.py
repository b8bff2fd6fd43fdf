from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
    verbose_name = "Policies"

    def ready(self) -> None:
        """Serve the inventory what it needs from this app (inventory.hooks)."""
        from inventory.hooks import (
            cluster_deleting,
            register_assignment_reader,
            register_rule_history_reader,
            register_snapshot_reader,
        )
        from policies.compile import current_snapshot
        from policies.queries import cluster_assignment_specs, rule_in_effect_since
        from policies.services import delete_cluster_objects

        register_assignment_reader(cluster_assignment_specs)
        register_snapshot_reader(current_snapshot)
        register_rule_history_reader(rule_in_effect_since)
        from policies.gates import ungated

        # Deleting the cluster was the decision: its objects go without a proposal (weak=False:
        # the wrapper is held by nothing else).
        cluster_deleting.connect(
            ungated(delete_cluster_objects), dispatch_uid="policies-cluster-delete", weak=False
        )
