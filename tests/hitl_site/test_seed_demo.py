"""The demo project's seed_demo command and front door."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.urls import reverse
from django.utils import timezone

from approvals.figures import DEFAULT_PERIOD, dashboard_figures
from approvals.models import inbox
from workflows.models import Decision, Delegation, Interrupt, Invocation
from workflows.policy import answer_policy

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_ships_with_the_demo_project_not_the_reusable_app():
    assert get_commands()["seed_demo"] == "hitl_site"


def test_seed_demo_creates_the_logins_and_fills_the_inbox():
    out = StringIO()
    call_command("seed_demo", stdout=out)
    printed = out.getvalue()
    # One login a line, each said once.
    for login in (
        "  approver / approver and approver2 / approver2: staff approvers",
        "  ada / ada: away until Friday; approver2 stands in for her",
        "  director / director: group directors",
        "  admin / admin: superuser",
    ):
        assert f"\n{login}" in printed and printed.count(login.split(":")[0]) == 1
    users = get_user_model().objects
    admin = users.get(username="admin")
    assert admin.is_superuser and admin.check_password("admin")
    # Two staff approvers: a quorum of two can be tried with two logins.
    approvers = [users.get(username=name) for name in ("approver", "approver2")]
    for approver in approvers:
        assert approver.is_staff and not approver.is_superuser
        assert approver.check_password(approver.username)
        assert approver.has_perm("workflows.answer_interrupt")
        assert approver.has_perm("workflows.view_invocation")
        assert approver.has_perm("workflows.rewind_interrupt")
        assert not approver.has_perm("workflows.cancel_invocation")
    approver, approver2 = approvers

    seeded = Invocation.objects.exclude(idempotency_key__startswith=demo_history().KEY_PREFIX)
    statuses = sorted(seeded.values_list("workflow_name", "status"))
    assert statuses == [
        ("content_moderation", "WAITING"),
        ("document_drafting", "WAITING"),
        ("document_drafting", "WAITING"),
        ("document_drafting", "WAITING"),  # the data processing agreement: signed
        ("expense_approval", "COMPLETED"),  # Grace's books: approved without asking
        ("expense_approval", "COMPLETED"),  # Alan's taxi: rejected by admin
        ("expense_approval", "COMPLETED"),  # Barbara's tickets: rejected, then changed
        ("expense_approval", "WAITING"),
        ("expense_approval", "WAITING"),
        ("expense_approval", "WAITING"),
        ("expense_approval", "WAITING"),
        ("support_agent", "WAITING"),  # the revised refund, after a rejection
        ("support_agent", "WAITING"),  # the e-mail, the refund passed on the standing grant
        ("support_agent", "WAITING"),  # the deletion, two approvers
    ]
    pending = Interrupt.objects.filter(status="pending")
    assert pending.count() == 15
    (signed,) = pending.filter(require_signature=True)
    assert signed.message == "Review version 1 of “Data processing agreement”"
    # Everything pending is each approver's to answer (admin already approved Linus's
    # finance question once, and the quorum needs a second person; nobody has voted on
    # Katherine's yet, so approver and approver2 can make its quorum of two), but for
    # Margaret's, which went up its ladder to the directors (the director login's alone),
    # and the review handed to Ada, who is away: approver2 stands in for her.
    assert inbox(approver).count() == 13
    assert inbox(approver2).count() == 14
    ada = users.get(username="ada")
    # Every login has an address (given after the seed: the seeded questions mailed nobody).
    assert set(users.values_list("email", flat=True)) == {
        f"{name}@example.com" for name in ("approver", "approver2", "ada", "director", "admin")
    }
    assert ada.check_password("ada") and ada.first_name == "Ada"
    delegation = Delegation.objects.get()
    assert (delegation.delegator, delegation.delegate) == (ada, approver2)
    assert timezone.localtime(delegation.ends_at).weekday() == 4  # until Friday
    for_ada = answer_policy().answerable_by_delegation(approver2, pending)
    assert [q.message for q in for_ada] == ["Review version 1 of “Holiday policy”"]
    director = users.get(username="director")
    assert director.check_password("director") and not director.is_superuser
    (escalated,) = inbox(director)
    assert escalated.payload["employee"] == "Margaret"
    assert (escalated.assignees, escalated.escalation_step) == (["group:directors"], 2)
    ladders = {
        q.payload["employee"]: (q.priority, q.escalation_step)
        for q in pending.filter(path__contains="/manager_approval@")
    }
    assert ladders == {
        "Ada": ("normal", 1),  # reminded
        "Margaret": ("high", 2),  # reminded, then handed to the directors
        "Linus": ("high", 0),
        "Katherine": ("high", 0),
    }
    assert pending.filter(due_at__lt=timezone.now()).count() == 1  # Margaret's: overdue
    quorum = pending.filter(quorum=2).order_by("created_at")
    assert [q.decisions.count() for q in quorum] == [1, 0, 0]
    assert f"{Invocation.objects.count()} invocations; 15 questions wait" in printed
    agent = sorted(q.message for q in pending.filter(workflow_name="support_agent"))
    assert agent == [
        "Delete the records of Linus? (customer asked to close the account in ticket T-103)",
        "Refund 70 to Ada for order A-17?",
        "Send “About your ticket T-102” to grace@example.com?",
    ]
    # Deadlines count down in the inbox: the managers' and the moderators' questions.
    assert pending.filter(deadline__isnull=False).count() == 7
    # The seeded decisions carry their comment, as a person's decision does.
    decisions = Decision.objects.exclude(interrupt__invocation__in=history())
    assert set(decisions.values_list("comment", flat=True)) == {
        "budgeted in Q3",
        "no receipt",
        "add the termination clause",
        "",  # the moderation answer has no comment
    }

    # One invocation already rewound: its rejection's steps superseded, the changed answer
    # reimbursed, and the question's answer one the managers may change again.
    rewound = seeded.get(input__employee="Barbara")
    assert rewound.rewound and rewound.output["status"] == "reimbursed"
    runs = dict(rewound.node_runs.values_list("path", "status"))
    assert runs["expense_approval@1/decide@1"] == "SUPERSEDED"
    assert runs["expense_approval@1/notify_rejection@1"] == "SUPERSEDED"
    assert runs["expense_approval@1/decide@2"] == "COMPLETED"
    assert runs["expense_approval@1/reimburse@1"] == "COMPLETED"
    assert rewound.events.filter(rewound=True, replaces__isnull=False).count() == 1
    changed = rewound.interrupts.get()
    assert changed.response["approved"] is True
    assert approver.has_perm("workflows.rewind_interrupt", changed)

    call_command("seed_demo", stdout=StringIO())  # a second run seeds nothing more
    assert seeded.count() == 14 and history().count() == len(demo_history().HISTORY)


def demo_history():
    """The demo's decision history: imported when a test runs, not when the module is
    collected (importing the demo makes its Celery app current; demo_project undoes that)."""
    from hitl_site import decision_history

    return decision_history


def history():
    return Invocation.objects.filter(idempotency_key__startswith=demo_history().KEY_PREFIX)


def test_seed_demo_decided_questions_in_the_weeks_before_for_the_dashboard():
    call_command("seed_demo", stdout=StringIO())
    assert history().filter(status="COMPLETED").count() == len(demo_history().HISTORY)
    figures = dashboard_figures(days=90)
    approvers = {approver.name: approver for approver in figures.approvers}
    assert approvers["approver"].rubber_stamp  # every expense approved within seconds
    assert not approvers["approver2"].rubber_stamp and approvers["approver2"].rejections
    # The page opens on 30 days, and flags them there too.
    flagged = {a.name for a in dashboard_figures(days=DEFAULT_PERIOD).approvers if a.rubber_stamp}
    assert flagged == {"approver"}
    assert figures.per_workflow["document_drafting"].median > 86400  # reviews take a day
    assert dashboard_figures(days=7).decisions < dashboard_figures(days=30).decisions


def test_the_front_door_leads_to_the_inbox(client):
    call_command("seed_demo", stdout=StringIO())
    inbox_url = reverse("admin:approvals_pendingapproval_changelist")
    assert client.get("/").url == inbox_url
    client.login(username="approver", password="approver")
    response = client.get("/", follow=True)
    assert response.redirect_chain[-1][0] == inbox_url
    assert "Approve an expense of 420.00 for Ada?" in response.content.decode()


def test_the_favicon_a_browser_asks_for_is_no_404(client):
    assert client.get("/favicon.ico").status_code == 204
