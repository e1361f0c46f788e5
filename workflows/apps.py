from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks registers the system checks when imported; task_mode connects Celery's
        # worker_init guard.
        # grants connects the audit trail's receiver of grant actions.
        from . import checks, grants, heartbeat, log, task_mode, webhooks, worker_connections  # noqa: F401
        from .conf import hitl_settings
        from .people import notifications
        from .registry import registry

        registry.autodiscover(hitl_settings.WORKFLOW_MODULES)
        webhooks.connect()  # signed notifications to the endpoints configured in admin
        notifications.connect()  # HITL["NOTIFIERS"]: e-mail, Slack
        heartbeat.connect()  # Celery worker and beat heartbeats, for hitl_status
        task_mode.connect()  # a worker that could receive no task refuses to start
        log.connect()  # the invocation id on a worker's log records
        worker_connections.connect()  # a worker keeps its database connections
