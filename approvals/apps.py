from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workflows.signals import interrupt_opened

        from . import checks  # noqa: F401 (registers the system checks)
        from .notify import on_interrupt_opened

        interrupt_opened.connect(on_interrupt_opened, dispatch_uid="approvals-email")
