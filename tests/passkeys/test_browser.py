"""Signed decisions in a real browser: Debian's Chromium driven by Playwright, with
Chromium's virtual authenticator (a platform passkey with user verification, through the
DevTools protocol's WebAuthn domain). An approver adds a passkey on "Your passkeys", then
approves a question that needs a signature on its decision page; the decision is recorded
with the assertion, whose receipt verifies offline. At 1,280 and 390 px wide, with no
page wider than the window.

Playwright's sync API runs an event loop in this thread while the browser is open, so the
database is read before and after the browser session, never during one.
"""

import os

import pytest

from tests.approvals.conftest import decision_url
from tests.approvals.test_inbox_browser import HIDDEN_WIDTH
from tests.asking import ask
from tests.factories import ApproverFactory
from tests.workflows.test_admin_browser import CHROMIUM, LAUNCH_ARGS
from workflows.audit import receipt, verify_assertion, verify_receipt
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Decision, Invocation, PasskeyCredential

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSKEYS = "/admin/approvals/passkey/"
VIRTUAL_PASSKEY = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}


@pytest.mark.parametrize("width", [1280, 390])
def test_an_approver_adds_a_passkey_and_signs_a_decision(live_server, signing_key, width):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    alice = ApproverFactory(username="alice")
    interrupt = ask(
        message="Release the payment run of 42 invoices?",
        payload={"invoices": 42, "total_eur": 98_400},
        require_signature=True,
    )
    seen = {}
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        devtools = context.new_cdp_session(page)
        devtools.send("WebAuthn.enable", {"enableUI": False})
        authenticator = devtools.send(
            "WebAuthn.addVirtualAuthenticator", {"options": VIRTUAL_PASSKEY}
        )["authenticatorId"]
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "pw")
        page.click("input[type=submit]")
        page.wait_for_url(f"{live_server.url}/admin/")

        page.click(f"a[href='{PASSKEYS}']")
        page.wait_for_selector("#passkey-add")
        page.fill("#passkey-name", "This laptop")
        page.fill("#passkey-password", "pw")
        page.click("#passkey-add-button")
        page.wait_for_selector("#passkey-list")
        seen["passkeys"] = page.inner_text("#passkey-list")
        seen["added"] = page.inner_text("ul.messagelist")
        seen["passkeys_hidden"] = page.evaluate(HIDDEN_WIDTH, "html")

        page.goto(live_server.url + decision_url(interrupt))
        page.wait_for_selector("#decision-form[data-signature=required]")
        seen["note"] = page.inner_text("#signature-note")
        page.fill("textarea[name=comment]", "Matches the bank file.")
        seen["decision_hidden"] = page.evaluate(HIDDEN_WIDTH, "html")
        page.click("#approve")
        page.wait_for_selector("ul.messagelist")
        seen["decided"] = page.inner_text("ul.messagelist")
        credentials = devtools.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})
        seen["sign_count"] = credentials["credentials"][0]["signCount"]
        browser.close()

    assert "This laptop" in seen["passkeys"]
    assert "Passkey “This laptop” added" in seen["added"]
    assert "signed with your passkey" in seen["note"]
    assert "is answered" in seen["decided"], seen["decided"]
    assert seen["passkeys_hidden"] == 0, f"the passkeys page is wider than {width} px"
    assert seen["decision_hidden"] == 0, f"the decision page is wider than {width} px"
    passkey = PasskeyCredential.objects.get(user=alice)
    assert (passkey.rp_id, passkey.origin) == ("localhost", live_server.url)
    assert passkey.sign_count == seen["sign_count"] >= 1
    decision = Decision.objects.get(interrupt=interrupt)
    assert decision.comment == "Matches the bank file."
    assert decision.interrupt.status == InterruptStatus.RESOLVED
    assert Invocation.objects.get(pk=interrupt.invocation_id).status == NodeStatus.COMPLETED
    entry = AuditEntry.objects.get(action="decision.recorded", interrupt_id=interrupt.pk)
    assert entry.data["assertion"]["credential_id"] == passkey.credential_id
    signed = receipt(entry)
    assert verify_assertion(signed, bytes(passkey.public_key)) is True
    assert verify_receipt(signed, signing_key.public_key()) is True
