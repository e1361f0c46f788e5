"""An approval gate's decision page in a real browser (Chromium driven by Playwright): a
supporter edits the proposed refund's args, sees the difference from the proposal before
submitting, and approves; a rejection with a reason brings the revised proposal. Saves
build/screenshots/gate-decision.png.

The database is read before and after each browser session, never during one (Playwright's
sync API runs an event loop in this thread while the browser is open)."""

import pytest

from tests.approvals.conftest import decision_url
from tests.gates.gated import REFUND, pending
from tests.workflows.test_admin_browser import SCREENSHOTS
from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Decision, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def question_url(live_server, invocation) -> str:
    """Where the question the invocation waits on is decided (read before the browser
    opens: the database is not read while it is open)."""
    return live_server.url + decision_url(pending(invocation))


def decision_page(login, url):
    page = login("sue")
    page.goto(url)
    return page


def test_a_supporter_edits_the_proposed_args_sees_the_difference_and_approves(
    live_server,
    chromium,
    supporter,
):
    invocation = services.start(REFUND, {"amount": 40, "customer": "ann"})
    url = question_url(live_server, invocation)
    with chromium() as login:
        page = decision_page(login, url)
        assert page.inner_text("h1") == "Refund 40 to ann?"
        assert page.input_value("#id_args-amount") == "40"
        assert page.is_hidden("#gate-diff")  # nothing changed yet
        page.fill("#id_args-amount", "25")
        page.fill("#id_reason", "half now, half once the item is back")
        diff = page.inner_text("#gate-diff tbody")
        assert diff.split() == ["amount", "40", "25"]
        page.screenshot(path=str(SCREENSHOTS / "gate-decision.png"), full_page=True)
        page.click("#approve")
        page.wait_for_load_state()
    decision = Decision.objects.get()
    assert decision.response["decision"] == "edit"
    assert decision.response["args"] == {"amount": 25, "customer": "ann"}
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"refunded": 25, "to": "ann"}


def test_a_rejection_with_a_reason_brings_the_revised_proposal(
    live_server,
    chromium,
    supporter,
):
    invocation = services.start(REFUND, {"amount": 900, "customer": "ann"})
    url = question_url(live_server, invocation)
    with chromium() as login:
        page = decision_page(login, url)
        page.fill("#id_reason", "over the limit for this customer")
        page.click("#reject")
        page.wait_for_load_state()
        # The next question in the inbox is the revised proposal.
        assert page.inner_text("h1") == "Refund 10 to ann?"
        assert page.input_value("#id_args-amount") == "10"
    (first,) = Decision.objects.all()
    assert first.response == {"decision": "reject", "reason": "over the limit for this customer"}
    revised = pending(Invocation.objects.get(pk=invocation.pk))
    assert revised.payload["args"] == {"amount": 10, "customer": "ann"}
