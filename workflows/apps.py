from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .conf import hitl_settings
        from .registry import registry

        registry.autodiscover(hitl_settings.WORKFLOW_MODULES)
