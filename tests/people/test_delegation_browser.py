"""Out of office in a real browser (Debian's Chromium driven by Playwright), on a laptop
and on a phone: a staff approver sets their out of office from the admin index, then their
delegate opens a question assigned to them, reads whom they answer for, and approves.
Saves build/screenshots/out-of-office-<width>.png and answering-for-<width>.png.

The database is read before and after each browser session, never during one (Playwright's
sync API runs an event loop in this thread while the browser is open)."""

import pytest

from tests.approvals.conftest import decision_url
from tests.approvals.test_inbox_browser import HIDDEN_WIDTH, PHONE, chromium  # noqa: F401
from tests.asking import WORKFLOW, ask
from tests.factories import ApproverFactory
from tests.workflows.test_admin_browser import SCREENSHOTS, WIDTH
from workflows.engine.status import NodeStatus
from workflows.models import Delegation, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PAGE_WIDTH = "() => document.documentElement.scrollWidth"


@pytest.mark.parametrize("width", [WIDTH, PHONE])
def test_set_an_out_of_office_then_answer_as_the_delegate(live_server, chromium, width):  # noqa: F811
    ApproverFactory(username="ada", first_name="Ada")
    ApproverFactory(username="bob", first_name="Bob")
    question = ask(message="Approve the Lisbon offsite?", assignees=["user:ada"])

    with chromium() as login:
        ada = login("ada", width=width)
        ada.click("#out-of-office-link a")
        ada.wait_for_selector("#delegation-form")
        ada.select_option("select[name=delegate]", label="bob")
        ada.check(f"input[name=workflows][value={WORKFLOW}]")
        ada.click("#delegation-form input[type=submit]")
        ada.wait_for_selector("ul.messagelist")
        set_message = ada.inner_text("ul.messagelist")
        given = ada.inner_text("#delegations-given")
        out_of_office_width = ada.evaluate(PAGE_WIDTH)
        ada.screenshot(path=SCREENSHOTS / f"out-of-office-{width}.png", full_page=True)

        bob = login("bob", width=width)
        bob.goto(live_server.url + decision_url(question))
        bob.wait_for_selector("#decision-form")
        banner = bob.inner_text("#standing-in")
        decision_width = bob.evaluate(PAGE_WIDTH)
        banner_hidden = bob.evaluate(HIDDEN_WIDTH, "#standing-in")
        bob.screenshot(path=SCREENSHOTS / f"answering-for-{width}.png", full_page=True)
        bob.click("#approve")
        bob.wait_for_selector("ul.messagelist")
        answered = bob.inner_text("ul.messagelist")

    assert "Your out of office is set" in set_message
    assert "bob" in given and WORKFLOW in given
    assert out_of_office_width <= width, f"the out-of-office page is wider than {width} px"
    assert banner.startswith("You are answering for Ada, who is away until ")
    assert decision_width <= width and banner_hidden == 0
    assert "is answered" in answered
    delegation = Delegation.objects.get()
    assert (delegation.delegator.username, delegation.delegate.username) == ("ada", "bob")
    assert delegation.workflows == [WORKFLOW]
    decision = question.decisions.get()
    assert (decision.actor.username, decision.on_behalf_of.username) == ("bob", "ada")
    assert Invocation.objects.get(pk=question.invocation_id).status == NodeStatus.COMPLETED
