from django.apps import AppConfig


class ChangesConfig(AppConfig):
    name = "changes"
    verbose_name = "Change control"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Hold the policies' writes that need approvals (policies.gates)."""
        from changes.gate import approval_gate
        from policies.gates import register

        register(approval_gate)
