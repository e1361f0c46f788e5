"""The approvals inbox in a real browser (Debian's Chromium driven by Playwright): a staff
approver who is not a superuser logs in, opens the inbox, decides through the generated
form, and the invocation completes; a quorum of two approvers in two browser contexts.
Saves build/screenshots/inbox.png and decision.png (the docs' pictures come from the demo:
`make screenshots`).

Playwright's sync API runs an event loop in this thread while the browser is open, so the
database is read before and after each browser session, never during one.
"""

import contextlib
import os
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.approvals.conftest import decision_url
from tests.asking import ask
from tests.factories import ApproverFactory, grant_answer
from tests.workflows.test_admin_browser import CHROMIUM, LAUNCH_ARGS, SCREENSHOTS, WIDTH
from workflows.engine.status import NodeStatus
from workflows.models import Decision, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# How many pixels of an element's content are scrolled out of sight sideways.
HIDDEN_WIDTH = (
    "(selector) => { const e = document.querySelector(selector); "
    "return Math.max(0, e.scrollWidth - e.clientWidth); }"
)


@pytest.fixture
def chromium(live_server):
    """`with chromium() as login:` gives login(username, width=1280) -> a logged-in
    page, each in a browser context of its own (its own cookies), all in one browser."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def browser() -> Iterator:
        with playwright_api.sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)

            def login(username: str, width: int = WIDTH):
                context = launched.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                page.goto(f"{live_server.url}/admin/login/")
                page.fill("#id_username", username)
                page.fill("#id_password", "pw")
                page.click("input[type=submit]")
                page.wait_for_url(f"{live_server.url}/admin/")
                return page

            yield login
            launched.close()

    return browser


def test_an_approver_decides_from_the_inbox(live_server, chromium):
    # An approver who may also look at the monitor: a staff user, not a superuser.
    alice = grant_answer(ApproverFactory(username="alice"), "view_invocation")
    assert not alice.is_superuser
    offsite = ask(
        message="Approve the team offsite in Lisbon?",
        payload={
            "requested_by": "Grace Hopper",
            "budget_eur": 4200,
            "dates": {"from": "2027-03-01", "to": "2027-03-03"},
            "attendees": ["Ada", "Linus", "Grace"],
        },
        assignees=["user:alice", "group:finance"],
        timeout=timedelta(hours=20),
        on_timeout={"approved": False, "comment": "no answer in time"},
    )
    ask(
        message="Grade the vendor's security questionnaire",
        payload={"vendor": "Globex"},
        response_schema={"enum": ["low risk", "medium risk", "high risk"]},
        timeout=timedelta(days=2),
    )
    ask(message="Second opinion on the Initech contract", quorum=2, payload={"value": 120000})

    with chromium() as login:
        page = login("alice")
        banner = page.inner_text("#pending-approvals")
        page.click("#pending-approvals a")
        page.wait_for_selector("#result_list")
        rows = page.locator("#result_list tbody tr").count()
        countdown = page.inner_text("time.hitl-deadline >> nth=0")
        inbox_hidden = page.evaluate(HIDDEN_WIDTH, "#changelist .results")
        page.screenshot(path=SCREENSHOTS / "inbox.png", full_page=True)
        page.click("text=Approve the team offsite in Lisbon?")
        page.wait_for_selector("#decision-form")
        page.fill("textarea[name=comment]", "Within budget, enjoy.")
        decision_hidden = page.evaluate(HIDDEN_WIDTH, "html")
        page.screenshot(path=SCREENSHOTS / "decision.png", full_page=True)
        page.click("#approve")
        page.wait_for_selector("ul.messagelist")
        message = page.inner_text("ul.messagelist")
        next_page = page.url
        page.goto(live_server.url + f"/admin/workflows/invocation/{offsite.invocation_id}/change/")
        monitor = page.inner_text("#content")
        page.wait_for_selector("[data-graph][data-rendered=true]")

    assert "Pending approvals: 3" in banner
    assert rows == 3
    assert inbox_hidden == 0, "a column of the inbox is scrolled out of sight at 1,280 px"
    assert decision_hidden == 0, "the decision page is wider than 1,280 px"
    assert countdown.startswith("in ")
    assert "is answered" in message
    assert next_page != live_server.url + decision_url(offsite), "opened the next question"
    assert "COMPLETED" in monitor.upper()
    invocation = Invocation.objects.get(pk=offsite.invocation_id)
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"approved": True, "comment": "Within budget, enjoy."}


def test_a_quorum_of_two_in_two_browser_contexts(live_server, chromium):
    ApproverFactory(username="ann")
    ApproverFactory(username="ben")
    question = ask(message="Sign off the Q1 budget", quorum=2, assignees=["user:ann", "user:ben"])
    url = live_server.url + decision_url(question)

    with chromium() as login:
        ann, ben = login("ann"), login("ben")
        ann.goto(url)
        ben.goto(url)
        ann.fill("textarea[name=comment]", "Numbers check out")
        ann.click("#approve")
        ann.wait_for_selector("ul.messagelist")
        first = ann.inner_text("ul.messagelist")
        ben.click("#approve")
        ben.wait_for_selector("ul.messagelist")
        second = ben.inner_text("ul.messagelist")

    assert "waiting for 1 more approval" in first
    assert "is answered" in second
    invocation = Invocation.objects.get(pk=question.invocation_id)
    assert invocation.status == NodeStatus.COMPLETED
    assert [d["actor"] for d in invocation.output["decisions"]] == ["ann", "ben"]
    assert invocation.output["decisions"][0]["comment"] == "Numbers check out"
    assert Decision.objects.filter(interrupt=question).count() == 2


# The right edge of the furthest-reaching element on the page, and of each inbox cell.
RIGHT_EDGES = """(selector) => {
  const right = (e) => Math.round(e.getBoundingClientRect().right);
  return {
    page: document.documentElement.scrollWidth,
    cells: [...document.querySelectorAll(selector)].map(right),
  };
}"""
PHONE = 390


def test_the_inbox_and_a_decision_page_on_a_phone(live_server, chromium):
    ApproverFactory(username="alice")
    offsite = ask(
        message="Approve the team offsite in Lisbon?",
        payload={
            "requested_by": "Grace Hopper",
            "tracking_reference": "LIS-" + "0123456789" * 8,
            "dates": {"from": "2027-03-01", "to": "2027-03-03"},
        },
        assignees=["user:alice", "group:finance"],
        timeout=timedelta(hours=20),
        on_timeout={"approved": False, "comment": "no answer in time"},
    )
    ask(message="Second opinion on the Initech contract", quorum=2, payload={"value": 120000})

    with chromium() as login:
        page = login("alice", width=PHONE)
        page.goto(live_server.url + "/admin/approvals/pendingapproval/")
        inbox_hidden = page.evaluate(HIDDEN_WIDTH, "#changelist .results")
        inbox = page.evaluate(RIGHT_EDGES, "#result_list tbody td, #result_list tbody th")
        due = page.inner_text("#result_list tbody tr >> nth=0 >> td.field-due")
        page.click("text=Approve the team offsite in Lisbon?")
        page.wait_for_selector("#decision-form")
        page.click(".hitl-payload summary")  # the nested dates, unfolded
        decision = page.evaluate(RIGHT_EDGES, ".hitl-payload td, #approve, #reject")
        page.fill("textarea[name=comment]", "Fine on a phone.")
        page.click("#approve")
        page.wait_for_selector("ul.messagelist")
        message = page.inner_text("ul.messagelist")

    assert inbox_hidden == 0, "the inbox scrolls sideways inside its box on a phone"
    assert inbox["page"] <= PHONE and max(inbox["cells"]) <= PHONE
    assert due.startswith("deadline in ")  # each cell says what it is
    assert decision["page"] <= PHONE, "the decision page is wider than a phone"
    assert max(decision["cells"]) <= PHONE
    assert "is answered" in message
    assert Invocation.objects.get(pk=offsite.invocation_id).output == {
        "approved": True,
        "comment": "Fine on a phone.",
    }
