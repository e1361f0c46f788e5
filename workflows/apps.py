from importlib.util import find_spec
from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def install_store_functions(using: str = "default", **kwargs: Any) -> None:
    """The server-side functions on PostgreSQL (the store's node transition, the audit
    trail's append), of the installed code's shape, (re)created after every migrate
    (workflows/store/functions.py, workflows/audit/functions.py)."""
    if connections[using].vendor == "postgresql":
        from .audit import functions as audit_functions
        from .store import functions

        functions.install(using)
        audit_functions.install(using)


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks registers the system checks when imported; task_mode connects Celery's
        # worker_init guard.
        # grants connects the audit trail's receiver of grant actions.
        from . import checks, log, notifications, task_mode, webhooks  # noqa: F401
        from .conf import hitl_settings
        from .registry import registry
        from .services import grants  # noqa: F401
        from .worker import connections, heartbeat

        registry.autodiscover(hitl_settings.WORKFLOW_MODULES)
        webhooks.connect()  # signed notifications to the endpoints configured in admin
        if find_spec("a2a") and find_spec("rest_framework"):  # A2A pushes, on the webhooks
            from .protocols.a2a_agent import push

            push.connect()
        notifications.connect()  # HITL["NOTIFIERS"]: e-mail, Slack
        heartbeat.connect()  # Celery worker and beat heartbeats, for hitl_status
        task_mode.connect()  # a worker that could receive no task refuses to start
        log.connect()  # the invocation id on a worker's log records
        connections.connect()  # a worker keeps its database connections
        post_migrate.connect(install_store_functions, sender=self)
