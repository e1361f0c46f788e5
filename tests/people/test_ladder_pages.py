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
