"""Fixtures of the gate tests: a member of the support team the test workflows' refunds
are assigned to, and the browser of the approvals tests."""

import pytest
from django.contrib.auth.models import Group

from tests.approvals.test_inbox_browser import chromium
from tests.factories import ApproverFactory

__all__ = ["chromium", "supporter"]


@pytest.fixture
def supporter():
    user = ApproverFactory(username="sue")
    user.groups.add(Group.objects.get_or_create(name="support")[0])
    return user
