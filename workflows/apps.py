from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks and policy register system checks when imported.
        from . import checks, heartbeat, log, policy, webhooks  # noqa: F401
        from .audit import checks as audit_checks  # noqa: F401
        from .conf import hitl_settings
        from .registry import registry

        registry.autodiscover(hitl_settings.WORKFLOW_MODULES)
        webhooks.connect()  # signed notifications to the endpoints configured in admin
        heartbeat.connect()  # Celery worker and beat heartbeats, for hitl_status
        log.connect()  # the invocation id on a worker's log records
