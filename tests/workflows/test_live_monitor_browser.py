"""The invocation monitor updates itself from the live stream (Chromium, at 1,280 and 390
px): an answer given elsewhere shows on an open page, its node runs and graph colours, with
no reload of the page."""

import threading

import pytest
from django.urls import reverse

from tests.factories import StaffFactory
from workflows import services
from workflows.models import Interrupt

from .test_admin_browser import browser  # noqa: F401 (the fixture: a signed-in Chromium)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ = """() => ({
  runs: document.querySelector('.hitl-node-runs').innerText,
  decide: document.querySelector('g.hitl-node[data-node-id="test_expense/decide"]')?.dataset.status,
  marker: window.hitlNotReloaded === true,
  overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
})"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_monitor_shows_an_answer_given_elsewhere_without_a_reload(
    live_server,
    browser,  # noqa: F811
    width,
):
    admin = StaffFactory()
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    question = Interrupt.objects.get(invocation=invocation)
    url = live_server.url + reverse("admin:workflows_invocation_change", args=[invocation.pk])

    with browser(admin.username) as page:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        page.wait_for_selector("[data-graph][data-rendered=true]")
        before = page.evaluate(READ)
        page.evaluate("window.hitlNotReloaded = true")
        # Answered in a thread of its own: this one runs the browser's event loop.
        answer = threading.Thread(
            target=services.submit_function_responses,
            args=([{"id": question.pk, "response": {"approved": True}}],),
        )
        answer.start()
        answer.join()
        page.wait_for_function(
            "() => document.querySelector('.hitl-node-runs').innerText.includes('reimburse')",
            timeout=20_000,
        )
        page.wait_for_selector("[data-graph][data-rendered=true]")
        after = page.evaluate(READ)

    assert "reimburse" not in before["runs"]
    assert before["decide"] in (None, "", "PENDING")
    assert after["marker"] is True  # the same page: updated in place
    assert after["decide"] == "COMPLETED"
    assert not after["overflow"] or width == 390
