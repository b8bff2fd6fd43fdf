from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Replay"

    def ready(self) -> None:
        """Give the policy editor's preview its replay line (policies.admin.draft)."""
        from policies.preview_lines import register_preview_line
        from replay.editor import preview_line

        register_preview_line(preview_line)
