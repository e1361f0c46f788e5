"""Every staff page of the demo, at a phone's 390 px and a desktop's 1,280 px (the admin's
sidebar open), measured in Debian's Chromium: nothing wider than the window, no table cell
narrower than three characters or wrapped past three lines, no column scrolled out of
sight inside its box. A page that fails names the page, the width and what is wrong.

The demo's own seed (`seed_demo`) fills the database, plus a question whether an effect
happened (the demo has none). Playwright's sync API runs an event loop in this thread while
the browser is open, so the database is read before the browser session, never during it.
"""

import json
import os
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.asking import ask
from tests.workflows.test_admin_browser import CHROMIUM, LAUNCH_ARGS, SCREENSHOTS
from workflows.engine.effects import IN_DOUBT_SCHEMA
from workflows.engine.questions import effect_question_id
from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)
SIDEBAR_FROM = 768  # the admin's navigation sidebar shows from this width, open by default
SHOT_PAGES = {"inbox", "monitor", "decision: approval"}  # saved under build/screenshots

# What is wrong with the page's layout, as sentences (an empty list: nothing). A character
# is the width of "0" in the cell's own font; a line is the cell's line height (1.2 times
# its font size when the line height is "normal").
CHECK_LAYOUT = r"""() => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) {
    problems.push(`the page is ${root.scrollWidth} px wide in a ${window.innerWidth} px window`);
  }
  const canvas = document.createElement('canvas').getContext('2d');
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const name = (cell) => {
    const row = cell.closest('tr');
    const table = cell.closest('table');
    const label = table.id || table.className || 'table';
    const text = cell.innerText.trim().slice(0, 30);
    return `${label} cell "${text}" (${cell.className || cell.tagName})`;
  };
  for (const cell of document.querySelectorAll('#content td, #content th')) {
    if (!shown(cell) || !cell.innerText.trim()) continue;
    const style = getComputedStyle(cell);
    canvas.font = style.font;
    const character = canvas.measureText('0').width;
    const width = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (width < 3 * character) {
      problems.push(`${name(cell)} is ${Math.round(width)} px wide, under 3 characters`);
    }
    // Lines of data (JSON, a list of fields, a nested table) are not text wrapping.
    if (cell.querySelector('pre, dl, details, table, ul, ol')) continue;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const fontSize = parseFloat(style.fontSize);
    const lineHeight =
      style.lineHeight === 'normal' ? 1.2 * fontSize : parseFloat(style.lineHeight);
    // Text clamped to a few lines (overflow hidden) shows only what its box holds.
    const clip = [...cell.querySelectorAll('*')]
      .find((e) => getComputedStyle(e).overflowY !== 'visible');
    let height = range.getBoundingClientRect().height;
    if (clip) height -= clip.scrollHeight - clip.clientHeight;
    // Parts stacked on lines of their own (a question, its path, its assignees) count as
    // one line: what is measured is how far the cell's text wraps.
    const parts = cell.innerText.split('\n').filter((part) => part.trim()).length;
    const lines = Math.round(height / lineHeight) - (parts - 1);
    if (lines > 3) {
      problems.push(`${name(cell)} wraps into ${lines} lines`);
    }
  }
  for (const box of document.querySelectorAll('#content *')) {
    if (!box.querySelector('table') || !shown(box)) continue;
    if (getComputedStyle(box).overflowX === 'visible') continue;
    if (box.scrollWidth > box.clientWidth + 1) {
      const hidden = box.scrollWidth - box.clientWidth;
      const label = box.id || box.className || box.tagName;
      problems.push(`${label} hides ${hidden} px of its table behind a scroll`);
    }
  }
  return problems;
}"""


def decision(interrupt: Interrupt) -> str:
    return reverse("admin:approvals_pendingapproval_change", args=[interrupt.pk])


def pending(**lookups: str) -> Interrupt:
    return Interrupt.objects.filter(status="pending", **lookups).earliest("created_at")


def staff_pages() -> dict[str, str]:
    """Each staff page of the seeded demo, by what it shows."""
    in_doubt = ask(
        interrupt_id=effect_question_id("widths-check", "refund", 1),
        message="Did 'refund' happen? Node 'agent' started it and stopped before its result "
        "was recorded.",
        payload={"node": "agent", "effect": "refund", "idempotency_key": "widths-check"},
        response_schema=IN_DOUBT_SCHEMA,
        assignees=["group:support"],
    )
    large = Invocation.objects.get(input__employee="Linus")
    moderation = Invocation.objects.get(workflow_name="content_moderation")
    return {
        "inbox": reverse("admin:approvals_pendingapproval_changelist"),
        "decision: approval": decision(pending(invocation__input__employee="Ada")),
        "decision: form": decision(pending(invocation=moderation)),
        "decision: quorum": decision(pending(quorum=2, invocation__input__employee="Katherine")),
        "decision: signed": decision(pending(require_signature=True)),
        "decision: gate": decision(pending(path__contains="/refund@")),
        "decision: in doubt": decision(in_doubt),
        "monitor": reverse("admin:workflows_invocation_change", args=[large.pk]),
        "monitor: parallel": reverse("admin:workflows_invocation_change", args=[moderation.pk]),
        "invocations": reverse("admin:workflows_invocation_changelist"),
        "questions": reverse("admin:workflows_interrupt_changelist"),
        "dashboard": reverse("admin:approvals_dashboard"),
        "grants": reverse("admin:workflows_grant_changelist"),
        "delegations": reverse("admin:workflows_delegation_changelist"),
        "out of office": reverse("admin:workflows_delegation_out_of_office"),
        "audit": reverse("admin:workflows_auditentry_changelist"),
        "passkeys": reverse("admin:approvals_passkey_changelist"),
        "agent chat": reverse("chat"),
    }


LIVE_FEEDS = re.compile(r".*/(events|stream)/(\?.*)?$")


def test_every_staff_page_holds_at_390_and_1280_px(live_server):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    call_command("seed_demo", stdout=StringIO())
    pages = staff_pages()
    problems: dict[str, list[str]] = {}
    seen: list[str] = []

    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": 900})
            # Layout only: the pages' live feeds (SSE) stay closed, so each page's network
            # settles, and no stream thread of the test server shares the in-memory SQLite
            # connection with the page requests (the live tests open the feeds).
            context.route(LIVE_FEEDS, lambda route: route.abort())
            page = context.new_page()
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin")
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}/admin/")
            page.goto(live_server.url + pages["inbox"])
            views = page.eval_on_selector_all(
                ".hitl-views a", "(links) => links.map((a) => [a.dataset.view, a.href])"
            )
            tabs = {f"inbox view {view}": href for view, href in views}
            for name, url in {**tabs, **{n: live_server.url + p for n, p in pages.items()}}.items():
                response = page.goto(url)
                page.wait_for_load_state("networkidle")
                where = f"{name} at {width} px"
                seen.append(where)
                if response is None or response.status != 200:
                    problems[where] = [f"answered {response.status if response else 'nothing'}"]
                    continue
                if width >= SIDEBAR_FROM and not page.is_visible("#nav-sidebar"):
                    problems[where] = ["the admin's sidebar is closed"]
                found = page.evaluate(CHECK_LAYOUT)
                if found:
                    problems.setdefault(where, []).extend(found)
                if name in SHOT_PAGES:
                    shot = name.replace(": ", "-").replace(" ", "-")
                    page.screenshot(path=SCREENSHOTS / f"{shot}-{width}.png", full_page=True)
        browser.close()

    assert len(seen) == 2 * (len(pages) + len(tabs)) and len(tabs) >= 5
    assert problems == {}, json.dumps(problems, indent=1, ensure_ascii=False)
