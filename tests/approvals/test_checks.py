"""System checks of the approvals app's configuration."""

import pytest
from django.conf import settings
from django.contrib import admin
from django.core.checks import run_checks
from django.test import override_settings
from django.urls import path

# A URLconf (this module) with the admin but not approvals.urls.
urlpatterns = [path("admin/", admin.site.urls)]
MAIL_ON = {"EMAIL_NOTIFICATIONS": True, "EMAIL_BASE_URL": "https://ops.example.com"}


def check_ids() -> set[str]:
    return {problem.id for problem in run_checks()}


def test_mail_without_a_base_url_is_a_configuration_error():
    assert "approvals.E001" not in check_ids()
    with override_settings(HITL={"EMAIL_NOTIFICATIONS": True}):
        assert "approvals.E001" in check_ids()
    with override_settings(HITL={"EMAIL_NOTIFICATIONS": True, "EMAIL_BASE_URL": "https://x.io"}):
        assert "approvals.E001" not in check_ids()


def test_listing_approvals_after_the_admin_loses_the_index_count():
    assert "approvals.W001" not in check_ids()
    others = [app for app in settings.INSTALLED_APPS if app != "approvals"]
    with override_settings(INSTALLED_APPS=[*others, "approvals.apps.ApprovalsConfig"]):
        assert "approvals.W001" in check_ids()


def test_mail_without_the_approvals_urls_is_a_configuration_error():
    with override_settings(HITL=MAIL_ON):
        assert "approvals.E002" not in check_ids()
        with override_settings(ROOT_URLCONF=__name__):
            (problem,) = [p for p in run_checks() if p.id == "approvals.E002"]
    assert "approvals:email-decision" in problem.msg
    assert 'include("approvals.urls")' in problem.hint
    with override_settings(ROOT_URLCONF=__name__):
        assert "approvals.E002" not in check_ids()  # no e-mails, no links to reach


def test_without_django_jsonform_installed_the_decision_pages_cannot_render():
    assert "approvals.E003" not in check_ids()
    others = [app for app in settings.INSTALLED_APPS if app != "django_jsonform"]
    with override_settings(INSTALLED_APPS=others):
        (problem,) = [p for p in run_checks() if p.id == "approvals.E003"]
    assert problem.hint == 'add "django_jsonform" to INSTALLED_APPS'


SLACK = "approvals.notifiers.slack.SlackNotifier"


def test_a_slack_notifier_that_cannot_post_is_a_warning():
    with override_settings(HITL={"NOTIFIERS": [SLACK], "SLACK": {"CHANNEL": "C0"}}):
        (problem,) = [p for p in run_checks() if p.id == "approvals.W002"]
    assert 'HITL["SLACK"]["TOKEN"] is empty' in problem.msg
    with override_settings(HITL={"NOTIFIERS": [SLACK], "SLACK": {"TOKEN": "xoxb-1"}}):
        (problem,) = [p for p in run_checks() if p.id == "approvals.W002"]
    assert 'no "CHANNEL" and no "USERS"' in problem.msg
    configured = {"NOTIFIERS": [SLACK], "SLACK": {"TOKEN": "xoxb-1", "CHANNEL": "C0"}}
    with override_settings(HITL={**configured, "EMAIL_BASE_URL": "https://x.io"}):
        assert "approvals.W002" not in check_ids()


def test_slack_links_need_a_base_url_and_the_approvals_urls():
    configured = {"NOTIFIERS": [SLACK], "SLACK": {"TOKEN": "xoxb-1", "CHANNEL": "C0"}}
    with override_settings(HITL=configured):
        (problem,) = [p for p in run_checks() if p.id == "approvals.E001"]
    assert problem.msg.startswith("the Slack notifier is on")
    with override_settings(HITL={**configured, "EMAIL_BASE_URL": "https://x.io"}):
        assert "approvals.E001" not in check_ids()
        with override_settings(ROOT_URLCONF=__name__):
            assert "approvals.E002" in check_ids()


@pytest.mark.parametrize(
    "thresholds",
    [
        {"RUBBER_STAMP_APPROVAL_RATE": 95},  # a percentage, not a fraction
        {"RUBBER_STAMP_APPROVAL_RATE": -0.1},
        {"RUBBER_STAMP_MIN_DECISIONS": 0},
        {"RUBBER_STAMP_MEDIAN_SECONDS": -1},
        {"DASHBOARD_MAX_DECISIONS": 0},
    ],
)
def test_a_dashboard_threshold_out_of_range_is_a_configuration_error(thresholds):
    assert "approvals.E004" not in check_ids()
    with override_settings(HITL=thresholds):
        (problem,) = [p for p in run_checks() if p.id == "approvals.E004"]
    assert next(iter(thresholds)) in problem.msg
    with override_settings(
        HITL={"RUBBER_STAMP_APPROVAL_RATE": 1, "RUBBER_STAMP_MEDIAN_SECONDS": 0}
    ):
        assert "approvals.E004" not in check_ids()
