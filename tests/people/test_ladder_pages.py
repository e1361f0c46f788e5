"""Where a person looks, the ladder's state: the decision page and the admin's interrupt
page say how many steps applied and what the next one does, and when."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from tests.approvals.conftest import decision_url
from tests.asking import ask
from tests.factories import StaffFactory
from workflows import services

from .conftest import HAND_OVER_AFTER, REMIND_AFTER

pytestmark = pytest.mark.django_db(transaction=True)


def ladder_line(content: bytes) -> str:
    match = re.search(rb'id="escalation-ladder">(.*?)</p>', content, re.S)
    return html.unescape(match.group(1).decode()).replace("\xa0", " ") if match else ""


def admin_field(content: bytes) -> str:
    match = re.search(
        rb'field-escalation_ladder.*?<div class="readonly">(.*?)</div>', content, re.S
    )
    return html.unescape(match.group(1).decode()).replace("\xa0", " ").strip() if match else ""


def test_the_decision_page_shows_the_steps_applied_and_the_next(laddered, manager, client):
    question = laddered()
    client.force_login(manager)
    first = ladder_line(client.get(decision_url(question)).content)
    assert first.startswith(
        "Escalation: 0 of 2 steps applied; next: remind the assignees, in 3 hours"
    )
    services.escalate_interrupts(now=question.next_escalation_at)
    line = ladder_line(client.get(decision_url(question)).content)
    assert line.startswith(
        "Escalation: 1 of 2 steps applied; next: hand over to group:directors, in 23 hours"
    )


def test_the_admin_interrupt_page_shows_the_ladder(laddered, client):
    question = laddered()
    client.force_login(StaffFactory(username="root"))
    url = reverse("admin:workflows_interrupt_change", args=[quote(question.pk)])
    assert admin_field(client.get(url).content).startswith("0 of 2 steps applied; next: remind")
    asked = question.next_escalation_at - REMIND_AFTER
    services.escalate_interrupts(now=asked + HAND_OVER_AFTER + timedelta(minutes=1))
    assert admin_field(client.get(url).content) == "2 of 2 steps applied; none left"


def test_a_question_without_a_ladder_shows_none(manager, client):
    question = ask(assignees=["group:managers"])
    client.force_login(manager)
    assert ladder_line(client.get(decision_url(question)).content) == ""
    client.force_login(StaffFactory(username="root"))
    url = reverse("admin:workflows_interrupt_change", args=[quote(question.pk)])
    assert admin_field(client.get(url).content) == "none"


def status_line(content: bytes) -> str:
    match = re.search(rb'<p class="hitl-status">(.*?)</p>', content, re.S)
    text = re.sub(r"<[^>]+>", "", match.group(1).decode()) if match else ""
    return " ".join(html.unescape(text).replace("\xa0", " ").split())


def handover_lines(content: bytes) -> list[str]:
    found = re.findall(rb'<p class="hitl-handover">(.*?)</p>', content, re.S)
    return [" ".join(html.unescape(line.decode()).replace("\xa0", " ").split()) for line in found]


def test_the_decision_page_says_priority_due_target_and_deadline_in_the_inboxs_words(
    laddered, manager, client
):
    question = laddered(
        priority="high",
        due=timedelta(hours=8),
        timeout=timedelta(days=3),
        on_timeout={"approved": False},
    )
    client.force_login(manager)
    line = status_line(client.get(decision_url(question)).content)
    assert line.startswith("Pending · high priority · asked 0 minutes ago · due in 7 hours")
    assert line.endswith("· deadline in 2 days, 23 hours, then answered with “approved: no”")
    assert "when overdue" not in line

    plain = laddered(escalation=[])
    line = status_line(client.get(decision_url(plain)).content)
    assert line == "Pending · normal priority · asked 0 minutes ago · no deadline"


def test_the_decision_page_says_who_handed_the_question_over_and_when(
    laddered, manager, director, client
):
    question = laddered()
    client.force_login(director)
    asked = question.next_escalation_at - REMIND_AFTER
    services.escalate_interrupts(now=asked + HAND_OVER_AFTER + timedelta(minutes=1))
    lines = handover_lines(client.get(decision_url(question)).content)
    # The reminder changed no hands; the second step did.
    assert lines == [
        "Escalated (step 2 of its ladder) 0 minutes ago: from group:managers to group:directors."
    ]
    services.reassign(question.pk, ["user:mia"], actor=director)
    client.force_login(manager)
    lines = handover_lines(client.get(decision_url(question)).content)
    assert lines[1] == "Reassigned by dora 0 minutes ago: from group:directors to user:mia."
