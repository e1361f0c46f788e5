"""System checks of the approvals app's configuration."""

from typing import Any

from django.apps import apps
from django.core.checks import Error, Warning, register

from workflows.conf import hitl_settings


@register()
def check_approvals(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    if hitl_settings.EMAIL_NOTIFICATIONS and not hitl_settings.EMAIL_BASE_URL:
        problems.append(
            Error(
                'HITL["EMAIL_NOTIFICATIONS"] is on but HITL["EMAIL_BASE_URL"] is empty: the '
                "e-mailed links would have no host",
                hint='set HITL["EMAIL_BASE_URL"], e.g. "https://ops.example.com"',
                id="approvals.E001",
            )
        )
    labels = [config.label for config in apps.get_app_configs()]  # INSTALLED_APPS order
    if "admin" in labels and labels.index("approvals") > labels.index("admin"):
        problems.append(
            Warning(
                "the admin index shows no pending-approvals count: Django's admin/index.html "
                "is found before the approvals app's",
                hint='list "approvals" before "django.contrib.admin" in INSTALLED_APPS',
                id="approvals.W001",
            )
        )
    return problems
