"""System checks of the approvals app's configuration."""

from typing import Any

from django.conf import settings
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
    apps = list(settings.INSTALLED_APPS)
    if "django.contrib.admin" in apps and apps.index("approvals") > apps.index(
        "django.contrib.admin"
    ):
        problems.append(
            Warning(
                "the admin index shows no pending-approvals count: Django's admin/index.html "
                "is found before the approvals app's",
                hint='list "approvals" before "django.contrib.admin" in INSTALLED_APPS',
                id="approvals.W001",
            )
        )
    return problems
