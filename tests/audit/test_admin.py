"""The audit list in the admin: viewing and filtering only; no page adds, changes or
deletes an entry; selected entries download as JSON lines; newest first, with whom a
delegate acted for."""

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.asking import ask
from tests.factories import ApproverFactory, StaffFactory
from workflows import services
from workflows.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff_client(client):
    client.force_login(StaffFactory(username="auditor"))
    return client


@pytest.fixture
def decided():
    ada = ApproverFactory(username="ada")
    interrupt = ask()
    services.decide(interrupt.pk, {"approved": True}, actor=ada, comment="fine")
    return interrupt


def url(name: str, *args) -> str:
    return reverse(f"admin:workflows_auditentry_{name}", args=args)


def test_the_list_shows_and_filters_the_entries(staff_client, decided):
    page = staff_client.get(url("changelist"))
    assert page.status_code == 200
    assert page.content.decode().count("decision.recorded") >= 1
    filtered = staff_client.get(url("changelist"), {"action": "answer.accepted"})
    assert list(filtered.context["cl"].result_list) == list(
        AuditEntry.objects.filter(action="answer.accepted")
    )
    by_actor = staff_client.get(url("changelist"), {"actor_name": "ada"})
    assert {e.action for e in by_actor.context["cl"].result_list} == {
        "decision.recorded",
        "answer.accepted",
    }


def test_an_entry_page_is_read_only(staff_client, decided):
    entry = AuditEntry.objects.get(action="decision.recorded")
    page = staff_client.get(url("change", entry.pk))
    assert page.status_code == 200
    assert entry.entry_hash in page.content.decode()
    assert not page.context["has_change_permission"]
    assert 'name="_save"' not in page.content.decode()
    assert staff_client.post(url("change", entry.pk), {"action": "x"}).status_code == 403
    assert staff_client.get(url("add")).status_code == 403
    assert staff_client.post(url("delete", entry.pk), {"post": "yes"}).status_code == 403
    assert AuditEntry.objects.get(pk=entry.pk).action == "decision.recorded"


def test_no_bulk_delete_and_a_download_of_the_selected(staff_client, decided):
    page = staff_client.get(url("changelist"))
    assert "delete_selected" not in page.content.decode()
    chosen = AuditEntry.objects.filter(interrupt_id=decided.pk).order_by("id")
    response = staff_client.post(
        url("changelist"),
        {"action": "download", "_selected_action": [e.pk for e in chosen]},
    )
    assert response["Content-Type"] == "application/jsonl"
    rows = [json.loads(line) for line in response.content.decode().splitlines()]
    assert [(r["id"], r["entry_hash"]) for r in rows] == [(e.pk, e.entry_hash) for e in chosen]


def test_the_list_is_newest_first_and_names_whom_a_delegate_acted_for(staff_client):
    ada, bob = ApproverFactory(username="ada"), ApproverFactory(username="bob")
    now = timezone.now()
    services.delegate(ada, bob, now - timedelta(hours=1), now + timedelta(days=1), actor=ada)
    question = ask(assignees=["user:ada"])
    services.decide(question.pk, {"approved": True}, actor=bob)
    page = staff_client.get(url("changelist"))
    listed = list(page.context["cl"].result_list)
    assert [e.pk for e in listed] == sorted((e.pk for e in listed), reverse=True)
    recorded = AuditEntry.objects.get(action="decision.recorded")
    assert recorded.on_behalf_of == ada
    html = page.content.decode()
    assert "on behalf of" in html.lower()
    row = re.search(rf"<tr>.*?>{recorded.pk}</a>.*?</tr>", html, re.S)
    assert row and '<td class="field-for_whom">ada</td>' in row.group(0)
