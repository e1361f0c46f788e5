"""The demo project's seed_demo command and front door."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.urls import reverse

from approvals.models import inbox
from workflows.models import Interrupt, Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_ships_with_the_demo_project_not_the_reusable_app():
    assert get_commands()["seed_demo"] == "hitl_site"


def test_seed_demo_creates_the_logins_and_fills_the_inbox():
    out = StringIO()
    call_command("seed_demo", stdout=out)
    printed = out.getvalue()
    assert "approver / approver" in printed and "admin / admin" in printed
    users = get_user_model().objects
    approver, admin = users.get(username="approver"), users.get(username="admin")
    assert approver.is_staff and not approver.is_superuser
    assert admin.is_superuser
    assert approver.check_password("approver") and admin.check_password("admin")
    assert approver.has_perm("workflows.answer_interrupt")
    assert approver.has_perm("workflows.view_invocation")
    assert not approver.has_perm("workflows.cancel_invocation")

    statuses = sorted(Invocation.objects.values_list("workflow_name", "status"))
    assert statuses == [
        ("content_moderation", "WAITING"),
        ("document_drafting", "WAITING"),
        ("document_drafting", "WAITING"),
        ("expense_approval", "COMPLETED"),  # Grace's books: approved without asking
        ("expense_approval", "COMPLETED"),  # Alan's taxi: rejected by admin
        ("expense_approval", "WAITING"),
        ("expense_approval", "WAITING"),
        ("expense_approval", "WAITING"),
    ]
    pending = Interrupt.objects.filter(status="pending")
    assert pending.count() == 9
    # Everything pending is the approver's to answer (admin already approved Linus's
    # finance question once, and the quorum needs a second person).
    assert inbox(approver).count() == 9
    assert f"{Invocation.objects.count()} invocations; 9 questions wait" in printed

    call_command("seed_demo", stdout=StringIO())  # a second run seeds nothing more
    assert Invocation.objects.count() == 8


def test_the_front_door_leads_to_the_inbox(client):
    call_command("seed_demo", stdout=StringIO())
    inbox_url = reverse("admin:approvals_pendingapproval_changelist")
    assert client.get("/").url == inbox_url
    client.login(username="approver", password="approver")
    response = client.get("/", follow=True)
    assert response.redirect_chain[-1][0] == inbox_url
    assert "Approve an expense of 420.00 for Ada?" in response.content.decode()
