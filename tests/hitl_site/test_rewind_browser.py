""" "Change this answer" and the monitor of a rewound invocation in Debian's Chromium, at a
phone's 390 px and a desktop's 1,280 px, as the demo's approver (the demo's seed rewinds
Barbara's expense): the plan and the form show, nothing is wider than the window, no table
cell is squeezed (test_widths_browser's measure), and the answer is changed from the page.

The database is read before the browser session, never during it (Playwright's sync API
runs an event loop in this thread while the browser is open)."""

import json
import os
from io import StringIO

import pytest
from django.contrib.admin.utils import quote
from django.core.management import call_command
from django.urls import reverse

from tests.hitl_site.test_widths_browser import CHECK_LAYOUT, SIDEBAR_FROM, WIDTHS
from tests.workflows.test_admin_browser import CHROMIUM, LAUNCH_ARGS, SCREENSHOTS
from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_change_page_and_the_rewound_monitor_hold_at_390_and_1280_px(live_server):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    call_command("seed_demo", stdout=StringIO())
    rewound = Invocation.objects.get(input__employee="Barbara")
    barbara = rewound.interrupts.get()
    alan = Interrupt.objects.get(invocation__input__employee="Alan")
    change = "admin:approvals_pendingapproval_rewind"
    pages = {
        "change-answer": reverse(change, args=[quote(barbara.pk)]),
        "rewound-monitor": reverse("admin:workflows_invocation_change", args=[rewound.pk]),
        "rewound-decision": reverse("admin:approvals_pendingapproval_change", args=[barbara.pk]),
    }
    alan_page = reverse(change, args=[quote(alan.pk)])
    problems: dict[str, list[str]] = {}

    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        for width in WIDTHS:
            page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "approver")
            page.fill("#id_password", "approver")
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}/admin/")
            for name, path in pages.items():
                response = page.goto(live_server.url + path)
                page.wait_for_load_state("networkidle")
                where = f"{name} at {width} px"
                if response is None or response.status != 200:
                    problems[where] = [f"answered {response.status if response else 'nothing'}"]
                    continue
                if width >= SIDEBAR_FROM and not page.is_visible("#nav-sidebar"):
                    problems[where] = ["the admin's sidebar is closed"]
                problems.setdefault(where, []).extend(page.evaluate(CHECK_LAYOUT))
                page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=True)
            # What each page is for, seen as a person sees it.
            page.goto(live_server.url + pages["rewound-decision"])
            assert page.is_visible("#change-answer")
            page.goto(live_server.url + pages["change-answer"])
            assert page.is_visible("#rewind-plan") and page.is_visible("#reject")
            assert "decide" in page.inner_text("#plan-superseded")
            page.goto(live_server.url + pages["rewound-monitor"])
            assert page.is_visible("tr.hitl-row-SUPERSEDED")
            assert "answer changed, replaces event #" in page.inner_text(".hitl-event-rewound")
        # The approver changes Alan's answer from the page: the monitor follows.
        page.goto(live_server.url + alan_page)
        page.fill("#id__comment", "the receipt was found")
        page.click("#approve")
        page.wait_for_load_state("networkidle")
        assert "/admin/workflows/invocation/" in page.url
        assert "Answer changed" in page.inner_text(".messagelist")
        browser.close()

    problems = {where: found for where, found in problems.items() if found}
    assert problems == {}, json.dumps(problems, indent=1, ensure_ascii=False)
    alan.refresh_from_db()
    assert alan.response["approved"] is True
