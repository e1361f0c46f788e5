"""The passkey pages through Django's test client: "Your passkeys" (list, add with the
password, remove, each person's own only), and the decision page of a question that needs
a signature (the challenge of the form's answer, deciding with the assertion, refusals)."""

import json
import re

import pytest
from django.contrib.messages import get_messages
from django.core import mail
from django.urls import reverse

from approvals.links import DecisionLink, make_token
from approvals.passkeys import SESSION_CHALLENGE
from tests.approvals.conftest import INBOX, decision_url
from tests.approvals.test_email_links import EMAIL_ON
from tests.asking import ask
from tests.factories import ApproverFactory
from tests.passkeys.authenticator import SoftAuthenticator
from tests.passkeys.conftest import enrol, last_issued
from workflows.audit.assertions import b64url, from_b64url
from workflows.engine.status import InterruptStatus
from workflows.models import AuditEntry, Decision, PasskeyCredential
from workflows.services import passkeys

pytestmark = pytest.mark.django_db(transaction=True)

PASSKEYS = "/admin/approvals/passkey/"
# What the decision form answers with "Approve" and the comment "fine": the asking
# schema has a `comment` property, so the comment is in the answer too.
APPROVED = {"approved": True, "comment": "fine"}


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def post_json(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def test_the_admin_lists_passkeys_under_approvals(alice_client):
    index = alice_client.get("/admin/").content.decode()
    assert f'href="{PASSKEYS}"' in index
    assert alice_client.get(PASSKEYS).status_code == 200


def test_the_page_lists_ones_own_passkeys_only(alice_client, alice):
    enrol(alice, name="Alice's laptop")
    enrol(ApproverFactory(username="bob"), name="Bob's phone")
    page = alice_client.get(PASSKEYS).content.decode()
    assert "Alice&#x27;s laptop" in page
    assert "Bob" not in page


def test_adding_takes_the_password_then_the_ceremony(alice_client, alice):
    options_url, register_url = PASSKEYS + "options/", PASSKEYS + "register/"
    refused = post_json(alice_client, options_url, {"password": "wrong"})
    assert (refused.status_code, refused.json()["error"]) == (403, "password_required")
    assert SESSION_CHALLENGE not in alice_client.session
    options = post_json(alice_client, options_url, {"password": "pw"})
    assert options.status_code == 200
    assert alice_client.session[SESSION_CHALLENGE] == options.json()["challenge"]
    key = SoftAuthenticator()
    credential = key.create(options.json())
    added = post_json(alice_client, register_url, {"name": "Laptop", "credential": credential})
    assert added.status_code == 201, added.json()
    assert PasskeyCredential.objects.get().credential_id == key.id
    assert SESSION_CHALLENGE not in alice_client.session  # one registration per challenge
    again = post_json(alice_client, register_url, {"name": "Laptop", "credential": credential})
    assert (again.status_code, again.json()["error"]) == (400, "no_challenge")
    page = alice_client.get(PASSKEYS)
    assert "Passkey “Laptop” added" in " ".join(messages_of(page))


def test_a_refused_registration_says_why_and_keeps_nothing(alice_client):
    options = post_json(alice_client, PASSKEYS + "options/", {"password": "pw"}).json()
    credential = SoftAuthenticator().create(options, origin="https://phish.example")
    refused = post_json(
        alice_client, PASSKEYS + "register/", {"name": "Laptop", "credential": credential}
    )
    assert refused.status_code == 400
    assert "origin" in refused.json()["detail"]
    assert not PasskeyCredential.objects.exists()


def test_at_an_ip_address_the_page_says_passkeys_need_a_name_and_none_is_offered(alice_client):
    at_address = {"HTTP_HOST": "127.0.0.1:8000"}
    page = alice_client.get(PASSKEYS, **at_address).content.decode()
    assert 'id="passkey-host-refused"' in page
    assert "passkeys need a domain name" in page
    assert "Open this page at http://localhost:8000/ instead." in page
    assert re.search(r'id="passkey-add-button"[^>]*disabled', page)
    refused = alice_client.post(
        PASSKEYS + "options/",
        json.dumps({"password": "pw"}),
        content_type="application/json",
        **at_address,
    )
    assert (refused.status_code, refused.json()["error"]) == (400, "host_unsupported")
    assert SESSION_CHALLENGE not in alice_client.session
    by_name = alice_client.get(PASSKEYS, HTTP_HOST="localhost:8000").content.decode()
    assert 'id="passkey-host-refused"' not in by_name


def test_one_removes_ones_own_passkey_not_anothers(alice_client, alice):
    mine, _ = enrol(alice)
    theirs, _ = enrol(ApproverFactory(username="bob"))
    assert alice_client.get(f"{PASSKEYS}{mine.pk}/remove/").status_code == 405
    assert alice_client.post(f"{PASSKEYS}{theirs.pk}/remove/").status_code == 404
    removed = alice_client.post(f"{PASSKEYS}{mine.pk}/remove/")
    assert removed.status_code == 302
    assert list(PasskeyCredential.objects.values_list("pk", flat=True)) == [theirs.pk]


def test_the_decision_page_says_the_decision_is_signed(alice_client, alice):
    interrupt = ask(message="Release the payment run?", require_signature=True)
    page = alice_client.get(decision_url(interrupt)).content.decode()
    assert 'data-signature="required"' in page
    assert "You have no passkey yet" in page
    assert reverse("admin:approvals_passkey_changelist") in page
    enrol(alice)
    page = alice_client.get(decision_url(interrupt)).content.decode()
    assert "signed with your passkey" in page and "no passkey yet" not in page
    plain = alice_client.get(decision_url(ask())).content.decode()
    assert "data-signature" not in plain


def test_the_page_gives_the_challenge_of_the_forms_answer(alice_client, alice):
    _, key = enrol(alice)
    interrupt = ask(require_signature=True)
    form = {"_action": "challenge", "decision": "approve", "comment": "fine"}
    options = alice_client.post(decision_url(interrupt), form)
    assert options.status_code == 200
    expected = last_issued(alice, interrupt, APPROVED, "fine")
    assert options.json()["challenge"] == b64url(expected)
    assert [c["id"] for c in options.json()["allowCredentials"]] == [key.id]
    invalid = alice_client.post(decision_url(interrupt), {"_action": "challenge"})
    assert (invalid.status_code, invalid.json()["error"]) == (400, "invalid_response")
    assert not Decision.objects.exists()


def test_deciding_on_the_page_with_the_assertion(alice_client, alice):
    _, key = enrol(alice)
    interrupt = ask(require_signature=True)
    challenge = passkeys.issue_challenge(alice, interrupt, APPROVED, "fine")
    form = {"decision": "approve", "comment": "fine", "assertion": json.dumps(key.get(challenge))}
    decided = alice_client.post(decision_url(interrupt), form)
    assert decided.status_code == 302
    assert "is answered" in " ".join(messages_of(decided))
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.RESOLVED
    entry = AuditEntry.objects.get(action="decision.recorded")
    assert entry.data["assertion"]["credential_id"] == key.id
    assert from_b64url(entry.data["assertion"]["public_key"], "key") == key.cose_public_key()


def test_the_page_refuses_a_decision_without_a_good_signature(alice_client, alice):
    _, key = enrol(alice)
    interrupt = ask(require_signature=True)
    unsigned = alice_client.post(decision_url(interrupt), {"decision": "approve"})
    assert "Not recorded: this question needs your signature" in " ".join(messages_of(unsigned))
    wrong = key.get(passkeys.issue_challenge(alice, interrupt, {"approved": False}, ""))
    form = {"decision": "approve", "assertion": json.dumps(wrong)}
    refused = alice_client.post(decision_url(interrupt), form)
    assert "Not recorded: the signature does not hold" in " ".join(messages_of(refused))
    assert not Decision.objects.exists()
    assert PasskeyCredential.objects.get().sign_count == 0


def test_the_challenge_names_where_to_add_a_passkey(alice_client):
    interrupt = ask(require_signature=True)
    form = {"_action": "challenge", "decision": "approve"}
    refused = alice_client.post(decision_url(interrupt), form)
    assert (refused.status_code, refused.json()["error"]) == (403, "no_passkey")
    assert refused.json()["passkeys_url"] == PASSKEYS


def test_the_mail_about_a_signed_question_links_to_its_page_only(settings, alice):
    settings.HITL = {**settings.HITL, **EMAIL_ON}
    alice.email = "alice@example.com"
    alice.save()
    ask(assignees=["user:alice"], require_signature=True)
    (message,) = mail.outbox
    assert "/admin/approvals/pendingapproval/" in message.body
    assert "/approvals/email/" not in message.body


def test_bulk_approval_and_email_links_leave_signed_questions_alone(alice_client, alice):
    enrol(alice)
    signed, plain = ask(require_signature=True), ask()
    form = {"action": "approve_selected", "_selected_action": [signed.pk, plain.pk]}
    listed = alice_client.post(INBOX, form, follow=True)
    said = " ".join(messages_of(listed))
    assert "Approved 1; skipped 1." in said and "needs your signature" in said
    token = make_token(DecisionLink(signed.pk, alice.pk, "approve"))
    page = alice_client.post(f"/approvals/email/{token}/").content.decode()
    assert "needs your signature" in page
    signed.refresh_from_db()
    assert signed.status == InterruptStatus.PENDING
    assert not Decision.objects.filter(interrupt=signed).exists()
