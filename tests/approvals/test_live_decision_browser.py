"""The decision page follows its question's live feed (Chromium, at 1,280 and 390 px): an
answer given by someone else while approver alice has the page open shows in a status
banner and disables her form's buttons, with no reload, and the page does not overflow
sideways."""

import threading

import pytest

from tests.approvals.conftest import decision_url
from tests.asking import ask
from tests.factories import ApproverFactory
from workflows import services
from workflows.models import Decision

from .test_inbox_browser import chromium  # noqa: F401 (the fixture: logged-in pages)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ = """() => ({
  banner: ((b) => (b.hidden ? '' : b.innerText))(document.getElementById('hitl-live')),
  role: document.getElementById('hitl-live').getAttribute('role'),
  approve: document.getElementById('approve').disabled,
  reject: document.getElementById('reject').disabled,
  marker: window.hitlNotReloaded === true,
  overflow: document.documentElement.scrollWidth - window.innerWidth,
})"""

# Submits the form as Enter in a field would; whether the browser would send it.
SUBMIT = """() => {
  const form = document.getElementById('decision-form');
  let sent = null;
  form.addEventListener('submit', (event) => { sent = !event.defaultPrevented; }, { once: true });
  form.requestSubmit();
  return sent;
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_an_answer_given_elsewhere_disables_the_open_form(live_server, chromium, width):  # noqa: F811
    ApproverFactory(username="alice")
    bob = ApproverFactory(username="bob")
    question = ask(message="Approve the team offsite in Lisbon?")

    with chromium() as login:
        page = login("alice", width=width)
        page.goto(live_server.url + decision_url(question))
        page.evaluate("window.hitlNotReloaded = true")
        before = page.evaluate(READ)
        # Answered in a thread of its own: this one runs the browser's event loop.
        answer = threading.Thread(
            target=services.decide,
            args=(question.pk, {"approved": True}),
            kwargs={"actor": bob},
        )
        answer.start()
        answer.join()
        page.wait_for_selector("#hitl-live:not([hidden])", timeout=20_000)
        after = page.evaluate(READ)
        # Enter in a field, say: the stale form is not sent.
        sent = page.evaluate(SUBMIT)

    assert before["banner"] == "" and not before["approve"] and not before["reject"]
    assert after["marker"] is True  # the same page: updated in place
    assert after["banner"].startswith("Answered meanwhile by bob, ")
    assert "approved: yes" in after["banner"]
    assert after["role"] == "status"
    assert after["approve"] and after["reject"]
    assert before["overflow"] <= 0 and after["overflow"] <= 0
    assert sent is False
    assert list(Decision.objects.values_list("actor__username", flat=True)) == ["bob"]
