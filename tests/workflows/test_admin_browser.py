"""The invocation monitor in a real browser (Debian's Chromium driven by Playwright).

Playwright's sync API runs an event loop in this thread while the browser is open, so the
database is read before and after each browser session, never during one.
"""

import contextlib
import io
import os
import shutil
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser(live_server):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")

    @contextlib.contextmanager
    def session() -> Iterator:
        with playwright_api.sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = launched.new_page()
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "demo")
            page.fill("#id_password", "demo")
            page.click("input[type=submit]")
            yield page
            launched.close()

    return session


def cancel_from_changelist(page, base_url: str, invocation_id: str) -> str:
    page.goto(f"{base_url}/admin/workflows/invocation/")
    page.check(f"input[name=_selected_action][value='{invocation_id}']")
    page.select_option("select[name=action]", "cancel_invocations")
    page.click("button[name=index]")
    return page.inner_text("ul.messagelist")


def test_staff_sees_waiting_invocations_and_cancels_one(live_server, browser, tmp_path):
    call_command("seed_demo", stdout=io.StringIO())
    target = (
        Invocation.objects.filter(workflow_name="expense_approval", status="WAITING")
        .order_by("created_at")
        .first()
    )
    target_id = str(target.pk)

    with browser() as page:
        page.goto(f"{live_server.url}/admin/workflows/invocation/?status__exact=WAITING")
        waiting_rows = page.locator("#result_list tbody tr").count()
        page.screenshot(path=tmp_path / "invocations.png")

        page.goto(f"{live_server.url}/admin/workflows/invocation/{target_id}/change/")
        detail = page.inner_text("body")
        editing_controls = page.locator("input[name=_save], a.deletelink").count()

        first_message = cancel_from_changelist(page, live_server.url, target_id)
        second_message = cancel_from_changelist(page, live_server.url, target_id)

    assert waiting_rows == 4
    assert "expense_approval@1/manager_approval@1" in detail
    assert "Approve an expense of" in detail
    assert editing_controls == 0  # the monitor only shows; changes go through services
    assert "Cancel: 1 invocation(s)." in first_message
    assert "cannot cancel invocation" in second_message.lower()  # the engine's reason
    target.refresh_from_db()
    assert target.status == "CANCELLED"
    statuses = set(Interrupt.objects.filter(invocation=target).values_list("status", flat=True))
    assert statuses == {"cancelled"}
