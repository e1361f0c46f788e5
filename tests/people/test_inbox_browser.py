"""The inbox views in a real browser at 1,280 and 390 px: the counts on the admin index,
the view tabs, the priority and due badges (overdue in red), and nothing of the list
scrolled out of sight. Saves build/screenshots/inbox-views-<width>.png.

The database is read before and after each browser session, never during one (see
tests/approvals/test_inbox_browser.py)."""

from datetime import timedelta

import pytest

from tests.approvals.test_inbox_browser import HIDDEN_WIDTH, chromium  # noqa: F401 (fixture)
from tests.asking import ask
from tests.people.conftest import set_due
from tests.workflows.test_admin_browser import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RED = "rgb(186, 33, 33)"  # the admin's --error-fg (light theme)


@pytest.mark.parametrize("width", [1280, 390])
def test_inbox_views_badges_and_counts(live_server, chromium, scene, width):  # noqa: F811
    urgent = ask(message="Wire the deposit today", priority="urgent")
    set_due(urgent, -timedelta(hours=2))

    with chromium() as login:
        page = login("alice", width=width)
        index_overdue = page.inner_text('#pending-approvals [data-view="overdue"]')
        index_delegated = page.inner_text('#pending-approvals [data-view="delegated"]')
        index_hidden = page.evaluate(HIDDEN_WIDTH, "html")
        page.click('#pending-approvals [data-view="overdue"]')
        page.wait_for_selector("#result_list")
        rows = page.locator("#result_list tbody tr").count()
        badge = page.inner_text("#result_list tbody tr >> nth=0 >> .hitl-priority")
        due = page.locator("#result_list tbody tr >> nth=0 >> time.hitl-due")
        due_text, due_colour = due.inner_text(), due.evaluate("e => getComputedStyle(e).color")
        selected = page.inner_text(".hitl-views li.selected")
        list_hidden = page.evaluate(HIDDEN_WIDTH, "#changelist .results")
        page_hidden = page.evaluate(HIDDEN_WIDTH, "html")
        page.screenshot(path=SCREENSHOTS / f"inbox-views-{width}.png", full_page=True)
        page.click('.hitl-views [data-view="mine"]')
        page.wait_for_selector("#result_list")
        mine = page.inner_text("#result_list tbody")

    assert index_overdue == "overdue 2"
    assert index_delegated == "delegated to me 1"
    assert index_hidden == 0, f"the admin index is wider than {width} px"
    assert rows == 2
    assert badge == "urgent"
    assert due_text.startswith("overdue by")
    assert due_colour == RED
    assert selected == "overdue"
    assert list_hidden == 0, f"a column of the inbox is scrolled out of sight at {width} px"
    assert page_hidden == 0, f"the inbox is wider than {width} px"
    assert "For alice" in mine and "Wire the deposit" not in mine
