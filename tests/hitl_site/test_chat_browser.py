"""The demo's example agent chat (`/chat/`, hitl_site/chat.py) in Debian's Chromium: an
expense sent through the AG-UI endpoint pauses on the manager's question in the chat, the
answer typed there resumes it, and the chat shows the workflow's result; at a phone's width
too. The database is read after the browser session (Playwright's loop runs in this
thread while it is open)."""

import os
from io import StringIO

import pytest
from django.core.management import call_command

from tests.workflows.test_admin_browser import CHROMIUM, LAUNCH_ARGS, SCREENSHOTS
from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_chat_pauses_on_the_approval_and_goes_on_with_the_answer(live_server, width):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    call_command("seed_demo", stdout=StringIO())
    before = set(Invocation.objects.values_list("pk", flat=True))

    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
        page.goto(f"{live_server.url}/admin/login/?next=/chat/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "admin")
        page.click("input[type=submit]")
        page.wait_for_url(f"{live_server.url}/chat/")
        page.fill("#chat-employee", "Grace")
        page.fill("#chat-amount", "640")
        page.click("#chat-start [type=submit]")
        question = page.locator("#chat-log li.question")
        question.wait_for()
        asked = question.inner_text()
        steps = page.locator("#chat-log li.step").all_inner_texts()
        question.get_by_label("Approve?").check()
        question.get_by_label("Comment").fill("Within the travel budget.")
        question.get_by_role("button", name="Answer").click()
        done = page.locator("#chat-log li.agent")
        done.wait_for()
        result = done.inner_text()
        overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        page.screenshot(path=SCREENSHOTS / f"chat-{width}.png", full_page=True)
        browser.close()

    assert asked.startswith("Approve an expense of 640.00 for Grace?")
    assert any("manager_approval" in step for step in steps)
    assert result.startswith("Done:") and '"status":"reimbursed"' in result, result
    assert not overflow
    (started,) = Invocation.objects.exclude(pk__in=before)
    assert (started.status, started.output["status"]) == ("COMPLETED", "reimbursed")
    (answered,) = Interrupt.objects.filter(invocation=started)
    assert answered.response == {"approved": True, "comment": "Within the travel budget."}
    assert answered.resolved_by.username == "admin"
