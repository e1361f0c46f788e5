"""The decision page of an approval gate (Django's test client): the message, the args as
a form prefilled with the proposal, approve, approve an edit, reject with a reason; "always"
offered only to who may grant it."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages

from approvals.gates import REASON_NEEDED
from tests.approvals.conftest import decision_url
from tests.factories import ApproverFactory, grant_answer
from tests.gates.gated import DELETE, REFUND, pending
from workflows import services
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Invocation

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


def field_value(page: str, name: str) -> str:
    """The value an input or a textarea of the page shows."""
    area = re.search(rf'<textarea[^>]*name="{name}"[^>]*>\s*([^<]*)</textarea>', page)
    if area:
        return area.group(1).strip()
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    assert match, f"no field {name}"
    return re.search(r'value="([^"]*)"', match.group(0)).group(1)


def test_the_page_shows_the_message_and_the_args_prefilled(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    client.force_login(supporter)
    page = client.get(decision_url(pending(invocation))).content.decode()
    assert "Refund 40 to ann?" in page
    assert field_value(page, "args-amount") == "40"
    assert field_value(page, "args-customer") == "ann"
    assert 'id="gate-diff"' in page and "approvals/gate.js" in page
    assert "Remember this approval" in page
    assert 'id="approve"' in page and 'id="reject"' in page


def test_approving_edited_args_records_an_edit_and_runs_with_it(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    interrupt = pending(invocation)
    client.force_login(supporter)
    data = {"args-amount": "25", "args-customer": "ann", "reason": "partial", "decision": "approve"}
    client.post(decision_url(interrupt), {"_action": "decide", **data})
    decision = Decision.objects.get()
    assert decision.response == {
        "decision": "edit",
        "args": {"amount": 25, "customer": "ann"},
        "reason": "partial",
    }
    assert decision.comment == "partial"
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"refunded": 25, "to": "ann"}


def test_approving_unchanged_args_is_an_approval(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    client.force_login(supporter)
    data = {"args-amount": "40", "args-customer": "ann", "decision": "approve"}
    client.post(decision_url(pending(invocation)), {"_action": "decide", **data})
    assert Decision.objects.get().response == {"decision": "approve"}


def test_an_invalid_edit_is_shown_on_its_field_and_nothing_is_stored(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    interrupt = pending(invocation)
    client.force_login(supporter)
    data = {"args-amount": "-5", "args-customer": "ann", "decision": "approve"}
    page = client.post(decision_url(interrupt), {"_action": "decide", **data}).content.decode()
    assert "greater than or equal to 0" in page or "minimum of 0" in page
    assert not Decision.objects.exists()
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.PENDING


def test_a_rejection_with_a_reason_brings_the_revised_proposal(client, supporter):
    invocation = services.start(REFUND, {"amount": 900, "customer": "ann"})
    first = pending(invocation)
    client.force_login(supporter)
    data = {"args-amount": "900", "args-customer": "ann", "reason": "over the limit"}
    client.post(decision_url(first), {"_action": "decide", "decision": "reject", **data})
    assert Decision.objects.get().response == {"decision": "reject", "reason": "over the limit"}
    revised = pending(Invocation.objects.get(pk=invocation.pk))
    assert revised.pk != first.pk
    page = client.get(decision_url(revised)).content.decode()
    assert "Refund 10 to ann?" in page
    assert field_value(page, "args-amount") == "10"


def test_a_gate_without_edits_shows_its_args_read_only(client):
    ann = ApproverFactory(username="ann")
    invocation = services.start(DELETE, {"record": 7})
    client.force_login(ann)
    page = client.get(decision_url(pending(invocation))).content.decode()
    assert "Delete record 7?" in page
    assert 'name="args-record"' not in page
    assert "<tr><th>record</th><td>7</td></tr>" in page
    assert "2 approvals are needed" in page


def scopes_offered(page: str) -> list[str]:
    select = re.search(r'<select name="remember"[^>]*>(.*?)</select>', page, re.S)
    assert select, "no remember field"
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_always_is_offered_only_to_an_approver_the_grant_rule_lets_grant_it(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    url = decision_url(pending(invocation))
    client.force_login(supporter)
    assert scopes_offered(client.get(url).content.decode()) == ["", "invocation", "session"]
    # Chosen anyway (a crafted POST), the service refuses it and nothing is stored.
    data = {"args-amount": "40", "args-customer": "ann", "decision": "approve"}
    client.post(url, {"_action": "decide", **data, "remember": "always"})
    assert not Decision.objects.exists()
    grant_answer(supporter, "add_grant")
    client.force_login(User.objects.get(pk=supporter.pk))  # the permission cache, afresh
    assert scopes_offered(client.get(url).content.decode())[-1] == "always"


def test_the_message_after_an_edited_approval_names_the_edit(client, supporter):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    client.force_login(supporter)
    data = {"args-amount": "25", "args-customer": "ann", "decision": "approve"}
    response = client.post(
        decision_url(pending(invocation)), {"_action": "decide", **data}, follow=True
    )
    (message,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert message == "Decision recorded; approved with your changes: amount 25 (proposed 40)."


def test_a_rejection_without_a_reason_asks_for_one_and_stores_nothing(client, supporter):
    invocation = services.start(REFUND, {"amount": 900, "customer": "ann"})
    interrupt = pending(invocation)
    client.force_login(supporter)
    data = {"args-amount": "900", "args-customer": "ann", "reason": "  ", "decision": "reject"}
    page = client.post(decision_url(interrupt), {"_action": "decide", **data}).content.decode()
    assert REASON_NEEDED in page
    assert not Decision.objects.exists()
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.PENDING
