"""Fixtures of the inbox tests: logged-in clients and URLs of the admin pages."""

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from tests.factories import ApproverFactory

INBOX = "/admin/approvals/pendingapproval/"


def decision_url(interrupt) -> str:
    return reverse("admin:approvals_pendingapproval_change", args=[quote(interrupt.pk)])


@pytest.fixture
def approver(db):
    return ApproverFactory(username="alice")


@pytest.fixture
def login(client):
    """Log `user` into the test client; return the client."""

    def as_user(user):
        client.force_login(user)
        return client

    return as_user
