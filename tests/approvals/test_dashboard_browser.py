"""The approvals dashboard in a real browser (Debian's Chromium driven by Playwright) at
1,280 and 390 px: reached from the admin index, every chart drawn, nothing wider than
a phone. Saves build/screenshots/dashboard.png and dashboard-phone.png."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.approvals.test_dashboard import APPROVE, EXPENSE, MODERATION, REJECT, decide, viewer
from tests.approvals.test_inbox_browser import PHONE, chromium  # noqa: F401 (a fixture)
from tests.factories import InterruptFactory, UserFactory
from tests.workflows.test_admin_browser import SCREENSHOTS, WIDTH

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The page's width, the furthest right edge of any chart, and each chart's drawn width.
LAYOUT = """() => {
  const charts = [...document.querySelectorAll('svg.hitl-chart')];
  return {
    page: document.documentElement.scrollWidth,
    right: Math.max(...charts.map((c) => Math.round(c.getBoundingClientRect().right))),
    widths: charts.map((c) => Math.round(c.getBoundingClientRect().width)),
    bars: document.querySelectorAll('svg.hitl-chart [role=listitem]').length,
  };
}"""


@pytest.fixture
def seeded():
    viewer(username="supervisor")
    now = timezone.now()
    quick, careful = UserFactory(username="quick"), UserFactory(username="careful")
    for n in range(20):  # each decided seconds after it was asked, all of it in the past
        decide(quick, 2 + n % 5, APPROVE, asked=now - timedelta(days=n, minutes=1))
    for n, seconds in enumerate((300, 4000, 900, 20000, 1800)):
        decide(careful, seconds, REJECT if n % 2 else APPROVE, asked=now - timedelta(days=n))
    decide(careful, 7200, APPROVE, workflow=MODERATION, asked=now - timedelta(days=1))
    for minutes, priority in ((10, "urgent"), (200, "high"), (300, "normal"), (9000, "low")):
        InterruptFactory(
            workflow_name=EXPENSE,
            priority=priority,
            created_at=now - timedelta(minutes=minutes),
            due_at=now - timedelta(minutes=minutes // 2),
        )
    InterruptFactory(workflow_name=MODERATION)


def test_the_dashboard_on_a_desktop_and_on_a_phone(live_server, chromium, seeded):  # noqa: F811
    with chromium() as login:
        desktop = login("supervisor")
        desktop.click("#approvals-dashboard-link a")
        desktop.wait_for_selector("svg.hitl-chart")
        wide = desktop.evaluate(LAYOUT)
        flag = desktop.locator("#approval-rate [role=listitem]", has_text="rubber stamp")
        flagged = flag.get_attribute("aria-label")
        desktop.screenshot(path=SCREENSHOTS / "dashboard.png", full_page=True)
        desktop.select_option("#id_period", "7")
        desktop.click("#dashboard-filters input[type=submit]")
        desktop.wait_for_selector("svg.hitl-chart")
        filtered = desktop.url
        unflagged = desktop.locator("#approval-rate [role=listitem]", has_text="rubber").count()

        phone = login("supervisor", width=PHONE)
        phone.goto(live_server.url + "/admin/workflows/decision/dashboard/")
        phone.wait_for_selector("svg.hitl-chart")
        narrow = phone.evaluate(LAYOUT)
        phone.screenshot(path=SCREENSHOTS / "dashboard-phone.png", full_page=True)

    assert len(wide["widths"]) == 5 and wide["bars"] == 4 + 2 + 2 + 2 + 2
    assert wide["page"] <= WIDTH and wide["right"] <= WIDTH
    assert min(wide["widths"]) >= 380  # two columns of readable charts
    assert "period=7" in filtered
    assert flagged.startswith("quick: 100% of 20 votes approve; flagged")
    assert unflagged == 0  # 7 days: too few votes to judge
    assert narrow["page"] <= PHONE, "the dashboard is wider than a phone"
    assert narrow["right"] <= PHONE and min(narrow["widths"]) >= 300
