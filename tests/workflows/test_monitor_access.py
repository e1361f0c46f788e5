"""Who sees the monitor: `view_invocation` (and `view_interrupt`) is an operator's
permission that shows every invocation's input, payloads and answers, whoever the questions
were for; the answer permission alone opens none of it (answerers use the inbox, scoped by
the answer rule)."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from tests.factories import UserFactory
from workflows import services
from workflows.models import Interrupt

pytestmark = pytest.mark.django_db(transaction=True)

EXPENSE = {"employee": "Ada Lovelace", "amount": 420.0, "purpose": "conference in Zurich"}


def staff(*codenames: str):
    user = UserFactory(is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return user


@pytest.fixture
def answered():
    """An expense whose manager question was answered by a manager, with a comment."""
    manager = staff("answer_interrupt")
    manager.groups.add(Group.objects.create(name="managers"))
    invocation = services.start("test_expense", EXPENSE)
    question = Interrupt.objects.get(invocation=invocation, status="pending")
    services.decide(question.id, {"approved": True, "comment": "fine by me"}, actor=manager)
    return invocation, question


def monitor_pages(invocation, question) -> list[str]:
    return [
        reverse("admin:workflows_invocation_changelist"),
        reverse("admin:workflows_invocation_change", args=[invocation.pk]),
        reverse("admin:workflows_interrupt_change", args=[question.pk]),
    ]


def test_the_answer_permission_alone_opens_no_monitor_page(client, answered):
    client.force_login(staff("answer_interrupt"))
    for url in monitor_pages(*answered):
        assert client.get(url).status_code == 403, url


def test_an_operator_sees_every_input_payload_and_answer(client, answered):
    client.force_login(staff("view_invocation", "view_interrupt"))  # assigned nothing
    _, invocation_url, question_url = monitor_pages(*answered)
    invocation_page = client.get(invocation_url).content.decode()
    assert "conference in Zurich" in invocation_page and "fine by me" in invocation_page
    question_page = client.get(question_url).content.decode()
    assert "Ada Lovelace" in question_page and "fine by me" in question_page
