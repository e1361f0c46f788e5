"""System checks of the approvals app's configuration."""

from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings


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
