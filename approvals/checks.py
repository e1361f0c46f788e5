"""System checks of the approvals app's configuration."""

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Warning, register
from django.urls import NoReverseMatch, reverse

from workflows.conf import hitl_settings

# The pages the notifications (e-mail, Slack) link to (approvals.links reverses them),
# with where each comes from.
EMAILED_PAGES = {
    "approvals:email-decision": 'path("approvals/", include("approvals.urls"))',
    "admin:approvals_pendingapproval_change": 'path("admin/", admin.site.urls)',
}


@register()
def check_approvals(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    problems: list[Any] = []
    sender = _link_sender()
    if sender and not hitl_settings.EMAIL_BASE_URL:
        problems.append(
            Error(
                f'{sender} is on but HITL["EMAIL_BASE_URL"] is empty: the links it sends '
                "would have no host",
                hint='set HITL["EMAIL_BASE_URL"], e.g. "https://ops.example.com"',
                id="approvals.E001",
            )
        )
    if sender:
        problems.extend(_unreachable_emailed_pages(sender))
    problems.extend(_slack_problems())
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


def _link_sender() -> str:
    """The setting that sends the approvals pages' links (e-mail or Slack), "" if none."""
    if hitl_settings.EMAIL_NOTIFICATIONS:
        return 'HITL["EMAIL_NOTIFICATIONS"]'
    configured = getattr(settings, "HITL", {})
    slack = configured.get("SLACK")
    if SLACK_NOTIFIER in configured.get("NOTIFIERS", ()) and isinstance(slack, dict):
        return "the Slack notifier" if slack.get("TOKEN") else ""
    return ""


def _unreachable_emailed_pages(sender: str) -> list[Any]:
    """approvals.E002: a URL the notifications link to is not in the URLconf, so making
    each message fails and nobody is notified."""
    problems = []
    for name, include in EMAILED_PAGES.items():
        try:
            reverse(name, args=["x"])
        except NoReverseMatch:
            problems.append(
                Error(
                    f"{sender} is on but the URL {name!r} its messages link to is not "
                    "in the URLconf: no notification could be sent",
                    hint=f"add {include} to your ROOT_URLCONF's urlpatterns",
                    id="approvals.E002",
                )
            )
    return problems


SLACK_NOTIFIER = "approvals.notifiers.slack.SlackNotifier"


def _slack_problems() -> list[Any]:
    """approvals.W002: the Slack notifier is listed but cannot post: no token (it is then
    off), or nowhere to post (no CHANNEL, no USERS)."""
    if SLACK_NOTIFIER not in getattr(settings, "HITL", {}).get("NOTIFIERS", ()):
        return []
    config = hitl_settings.SLACK
    if not isinstance(config, dict):
        return []  # workflows.E004 says so
    if not config.get("TOKEN"):
        missing = 'HITL["SLACK"]["TOKEN"] is empty: the Slack notifier is off'
    elif not config.get("CHANNEL") and not config.get("USERS"):
        missing = 'HITL["SLACK"] has no "CHANNEL" and no "USERS": no message can be posted'
    else:
        return []
    return [
        Warning(
            f'{SLACK_NOTIFIER} is in HITL["NOTIFIERS"] but {missing}',
            hint="see docs/people.md, Notifications: the bot token (xoxb-...), a channel id "
            "and the assignees' Slack ids",
            id="approvals.W002",
        )
    ]


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
