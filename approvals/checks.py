"""System checks of the approvals app's configuration."""

from typing import Any

from django.apps import apps
from django.core.checks import Error, Warning, register
from django.urls import NoReverseMatch, reverse

from workflows.conf import hitl_settings

# The pages a notification e-mail links to (approvals.links and approvals.notify reverse
# them), with where each comes from.
EMAILED_PAGES = {
    "approvals:email-decision": 'path("approvals/", include("approvals.urls"))',
    "admin:approvals_pendingapproval_change": 'path("admin/", admin.site.urls)',
}


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
    if hitl_settings.EMAIL_NOTIFICATIONS:
        problems.extend(_unreachable_emailed_pages())
    if not apps.is_installed("django_jsonform"):
        problems.append(
            Error(
                "django_jsonform is not in INSTALLED_APPS: the decision pages of questions "
                "whose answers need its JSON editor fail with a server error",
                hint='add "django_jsonform" to INSTALLED_APPS',
                id="approvals.E003",
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


def _unreachable_emailed_pages() -> list[Any]:
    """approvals.E002: a URL the notification e-mails link to is not in the URLconf, so
    making each e-mail fails and nobody is notified."""
    problems = []
    for name, include in EMAILED_PAGES.items():
        try:
            reverse(name, args=["x"])
        except NoReverseMatch:
            problems.append(
                Error(
                    f'HITL["EMAIL_NOTIFICATIONS"] is on but the URL {name!r} the e-mails '
                    "link to is not in the URLconf: no notification could be sent",
                    hint=f"add {include} to your ROOT_URLCONF's urlpatterns",
                    id="approvals.E002",
                )
            )
    return problems


@register()
def check_dashboard_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """approvals.E004: a dashboard threshold out of range (a rate given in percent would
    never flag anyone)."""
    ranges = {
        "DASHBOARD_MAX_DECISIONS": (1, None),
        "RUBBER_STAMP_MIN_DECISIONS": (1, None),
        "RUBBER_STAMP_APPROVAL_RATE": (0, 1),
        "RUBBER_STAMP_MEDIAN_SECONDS": (0, None),
    }
    problems: list[Any] = []
    for key, (low, high) in ranges.items():
        value = getattr(hitl_settings, key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue  # workflows.E004 reports the type
        if value < low or (high is not None and value > high):
            within = f"between {low} and {high}" if high is not None else f"at least {low}"
            problems.append(
                Error(
                    f'HITL["{key}"] is {value!r}; it must be {within}',
                    hint="docs/people.md (Dashboard) explains the thresholds",
                    id="approvals.E004",
                )
            )
    return problems
