"""The "Pending approvals" list: who sees what, filters, search, ordering, columns, the
count on the admin index, and a constant number of queries as the list grows."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.auth.models import Group
from django.utils import timezone

from approvals.models import PendingApproval
from tests.approvals.conftest import INBOX
from tests.asking import ask
from tests.factories import ApproverFactory, StaffFactory, UserFactory
from workflows import services
from workflows.models import Interrupt

pytestmark = pytest.mark.django_db(transaction=True)


def listed(response) -> list[str]:
    return [row.pk for row in response.context["cl"].result_list]


def test_lists_only_pending_questions_the_user_may_answer(login, approver):
    mine = ask(message="For alice", assignees=["user:alice"])
    open_to_all = ask(message="For anyone")
    ask(message="For bob", assignees=["user:bob"])
    answered = ask(message="Done already")
    services.decide(answered.pk, {"approved": True}, actor=ApproverFactory())
    response = login(approver).get(INBOX)
    assert response.status_code == 200
    assert sorted(listed(response)) == sorted([mine.pk, open_to_all.pk])
    assert b"For bob" not in response.content


def test_a_group_assignment_and_a_decision_already_made(login, approver):
    Group.objects.create(name="finance").user_set.add(approver, ApproverFactory())
    for_finance = ask(assignees=["group:finance"], quorum=2)
    services.decide(for_finance.pk, {"approved": True}, actor=approver)
    other = ask(assignees=["group:finance"], quorum=2)
    assert listed(login(approver).get(INBOX)) == [other.pk]


def test_staff_without_the_permission_are_told_what_it_takes(login):
    ask(message="Approve the offsite?")
    StaffFactory(username="root")
    staff = UserFactory(username="newcomer", is_staff=True)
    client = login(staff)
    refused = client.get(INBOX)
    assert refused.status_code == 403
    page = refused.content.decode()
    assert "You may not answer questions yet" in page
    assert "Workflows | interrupt | Can answer interrupts" in page  # as the admin lists it
    assert "workflows.answer_interrupt" in page
    assert "Administrators here: root." in page
    assert "Log out" in page and "newcomer" in page  # the admin's layout, its header
    assert "Approve the offsite?" not in page
    index = client.get("/admin/")
    assert b"Pending approvals" not in index.content


def test_admin_index_links_the_inbox_with_the_users_count(login, approver):
    ask(assignees=["user:alice"])
    ask()
    ask(assignees=["user:bob"])
    index = login(approver).get("/admin/")
    assert b'href="/admin/approvals/pendingapproval/">Pending approvals: 2</a>' in index.content
    assert b"2 questions wait for your decision." in index.content


def test_filters_search_and_ordering(login, approver):
    bob = ApproverFactory(username="bob")
    now = timezone.now()
    first = ask(
        message="Pay invoice 17", payload={"vendor": "ACME"}, assignees=["user:alice", "user:bob"]
    )
    second = ask(message="Hire a contractor", payload={"vendor": "Globex"})
    third = ask(message="Buy laptops", payload={"vendor": "Initech"}, timeout=timedelta(hours=1))
    Interrupt.objects.filter(pk=third.pk).update(due_at=now - timedelta(minutes=5))
    services.claim(second.pk, actor=approver)
    services.claim(first.pk, actor=bob)
    client = login(approver)
    # All of the same priority: the one past its due date first, then the oldest first.
    assert listed(client.get(INBOX)) == [third.pk, first.pk, second.pk]
    asked = 4  # the column's index in the sort parameter (the checkbox is 0)
    assert listed(client.get(INBOX, {"o": f"-{asked}"})) == [third.pk, second.pk, first.pk]
    assert listed(client.get(INBOX, {"o": f"{asked}"})) == [first.pk, second.pk, third.pk]
    assert listed(client.get(INBOX, {"view": "mine"})) == [first.pk]
    assert listed(client.get(INBOX, {"view": "claimed"})) == [second.pk]
    assert listed(client.get(INBOX, {"view": "overdue"})) == [third.pk]
    assert listed(client.get(INBOX, {"q": "globex"})) == [second.pk]
    assert listed(client.get(INBOX, {"q": "invoice"})) == [first.pk]
    assert listed(client.get(INBOX, {"workflow": "test_expense"})) == []
    assert listed(client.get(INBOX, {"workflow": "hitl_test_ask"})) == [
        third.pk,
        first.pk,
        second.pk,
    ]


def test_an_empty_inbox_says_why(login, approver):
    client = login(approver)
    page = client.get(INBOX).content.decode()
    assert "Nothing waits for your decision" in page and 'id="result_list"' not in page
    ask(message="Pay invoice 17", assignees=["user:alice"])
    assert "Pay invoice 17" in client.get(INBOX).content.decode()
    for filtered in ({"view": "overdue"}, {"q": "no such words"}):
        page = client.get(INBOX, filtered).content.decode()
        assert "matches this search or these filters" in page, filtered
        assert "Show every question waiting for you" in page


def test_columns_say_what_for_whom_how_long_and_when_due(login, approver):
    Group.objects.create(name="ops").user_set.add(UserFactory())  # approver alice and one more
    ask(
        message="Approve the budget",
        assignees=["user:alice", "group:ops"],
        quorum=2,
        timeout=timedelta(hours=3),
        on_timeout={"approved": False},
    )
    ask(message="Overdue one", timeout=timedelta(seconds=1))
    ask(
        message="Grade it",
        response_schema={"type": "object", "properties": {"grade": {"type": "string"}}},
        timeout=timedelta(hours=3),
        on_timeout={"grade": "C"},
    )
    Interrupt.objects.filter(message="Overdue one").update(
        deadline=timezone.now() - timedelta(minutes=10)
    )
    page = login(approver).get(INBOX).content.decode()
    assert "Approve the budget" in page
    assert '<small class="quiet">hitl_test_ask</small>' in page  # the workflow, under it
    assert "user:alice, group:ops" in page
    assert "0 of 2" in page
    assert "0\xa0minutes ago" in page  # when it was asked
    assert "in 2\xa0hours" in page or "in 3\xa0hours" in page
    # The policy in a word in the list; the default answer itself on hover.
    assert '<small>then <span title="answered with “approved: no”">rejected</span>' in page
    assert '<span title="answered with “grade: C”">a default answer</span>' in page
    assert "overdue by 10\xa0minutes" in page
    assert 'class="hitl-deadline overdue"' in page  # shown in the error colour
    assert "then the invocation fails" in page
    assert 'class="hitl-deadline"' in page


@pytest.mark.parametrize("rows", [5, 50])
def test_the_list_takes_the_same_queries_at_5_and_50_rows(
    rows, login, approver, django_assert_num_queries
):
    bob = ApproverFactory(username="bob")
    for n in range(rows):
        interrupt = ask(message=f"Question {n}", quorum=2, assignees=["user:alice", "user:bob"])
        if n % 2:
            services.claim(interrupt.pk, actor=bob)
    client = login(approver)
    client.get(INBOX)  # warm the session and permission caches alike for both sizes
    # session, user, permissions x2, groups, delegations to the user, count, page
    with django_assert_num_queries(8):
        response = client.get(INBOX)
    assert len(listed(response)) == rows


def test_each_row_has_the_admins_action_checkbox(login, approver):
    """The row checkbox is written without Django's widget template, as Django writes it:
    the bulk actions read `_selected_action` and the admin's script its class."""
    question = ask(message='Pay "Acme" <now>?')
    page = login(approver).get(INBOX).content.decode()
    model_admin = admin.site._registry[PendingApproval]
    row = PendingApproval.objects.get(pk=question.pk)
    assert str(ModelAdmin.action_checkbox(model_admin, row)) in page
    assert str(model_admin.action_checkbox(row)) == ModelAdmin.action_checkbox(model_admin, row)
