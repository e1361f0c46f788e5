"""The invocation monitor in a real browser (Debian's Chromium driven by Playwright).

Playwright's sync API runs an event loop in this thread while the browser is open, so the
database is read before and after each browser session, never during one.
The monitor and graph tests save build/screenshots/monitor.png and workflow-graph.png, for
a person to look at (the docs' pictures come from the demo: `make screenshots`).
"""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from tests.factories import ApproverFactory, StaffFactory, grant_answer
from workflows import services
from workflows.models import Interrupt, Invocation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
WIDTH = 1280
STATUS_COLOURS = {  # monitor.css
    "PENDING": "rgb(229, 231, 235)",
    "RUNNING": "rgb(147, 197, 253)",
    "WAITING": "rgb(252, 211, 77)",
    "COMPLETED": "rgb(134, 239, 172)",
    "FAILED": "rgb(252, 165, 165)",
    "CANCELLED": "rgb(214, 211, 209)",
    None: "rgb(255, 255, 255)",
}

# What the picture shows: per drawn node, its status and the fill of its shape; per
# square of a parallel worker, the same. And whether any table is wider than its box.
READ_PICTURE = """() => {
  const fill = (el) => getComputedStyle(el.querySelector(':scope > .hitl-shape')).fill;
  const nodes = {};
  for (const g of document.querySelectorAll('svg.hitl-graph-svg g.hitl-node')) {
    nodes[g.dataset.nodeId] = {
      status: g.dataset.status || null,
      fill: fill(g),
      link: g.parentElement.tagName === 'a' ? g.parentElement.getAttribute('href') : null,
    };
  }
  const clusters = {};
  for (const g of document.querySelectorAll('svg.hitl-graph-svg g.hitl-cluster')) {
    clusters[g.dataset.nodeId] = {status: g.dataset.status || null, fill: fill(g)};
  }
  const items = [...document.querySelectorAll('svg.hitl-graph-svg rect.hitl-item')].map(
    (r) => ({status: r.dataset.status, fill: getComputedStyle(r).fill}));
  const overflowing = [...document.querySelectorAll('table')]
    .filter((t) => t.getBoundingClientRect().right > window.innerWidth + 1
      || t.getBoundingClientRect().right > t.parentElement.getBoundingClientRect().right + 1)
    .map((t) => t.className || t.id);
  return {nodes, clusters, items, overflowing,
          pageWidth: document.documentElement.scrollWidth};
}"""


@pytest.fixture
def browser(live_server):
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def session(username: str, password: str = "pw") -> Iterator:
        with playwright_api.sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = launched.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("input[type=submit]")
            yield page
            launched.close()

    return session


def open_monitor(page, url: str) -> dict:
    page.goto(url)
    page.wait_for_selector("[data-graph][data-rendered=true]")
    return page.evaluate(READ_PICTURE)


def test_monitor_draws_the_graph_coloured_by_status(live_server, browser):
    # A finance approver (not a superuser) who may also look at the monitor.
    fiona = grant_answer(ApproverFactory(username="fiona"), "view_invocation")
    fiona.groups.add(Group.objects.create(name="finance"), Group.objects.create(name="moderators"))
    ApproverFactory().groups.add(Group.objects.get(name="finance"))  # the quorum's second
    large = services.start("test_expense", {"employee": "Linus", "amount": 2500.0})
    manager = Interrupt.objects.get(invocation=large, path__contains="manager_approval")
    services.submit_function_responses([{"id": manager.id, "response": {"approved": True}}])
    moderation = services.start("test_moderation", {"posts": ["Hello", "Spam!", "Cat"]})
    first_post = Interrupt.objects.filter(invocation=moderation).order_by("path").first()
    services.submit_function_responses([{"id": first_post.id, "response": {"decision": "publish"}}])
    finance = Interrupt.objects.get(invocation=large, path__contains="finance_approval")
    large_url = live_server.url + reverse("admin:workflows_invocation_change", args=[large.pk])
    moderation_url = live_server.url + reverse(
        "admin:workflows_invocation_change", args=[moderation.pk]
    )

    with browser(fiona.username) as page:
        picture = open_monitor(page, large_url)
        page.screenshot(path=SCREENSHOTS / "monitor.png")
        page.click("svg.hitl-graph-svg a.hitl-link")
        decision_page = page.url
        worker_picture = open_monitor(page, moderation_url)

    nodes = picture["nodes"]
    assert {node_id: node["status"] for node_id, node in nodes.items()} == {
        "test_expense/START": "COMPLETED",
        "test_expense/prepare": "COMPLETED",
        "test_expense/auto_approve": None,
        "test_expense/manager_approval": None,
        "test_expense/decide": None,
        "test_expense/reimburse": None,
        "test_expense/notify_rejection": None,
        "test_expense/large_expense/START": "COMPLETED",
        "test_expense/large_expense/manager_approval": "COMPLETED",
        "test_expense/large_expense/finance_approval": "WAITING",
        "test_expense/large_expense/both_approved": "PENDING",
        "test_expense/large_expense/combine": None,
    }
    for node_id, node in nodes.items():
        if not node_id.endswith("/START"):
            assert node["fill"] == STATUS_COLOURS[node["status"]], node_id
    assert picture["clusters"] == {
        "test_expense/large_expense": {"status": "WAITING", "fill": STATUS_COLOURS["WAITING"]}
    }
    linked = {node_id for node_id, node in nodes.items() if node["link"]}
    assert linked == {"test_expense/large_expense/finance_approval"}
    assert decision_page == live_server.url + reverse(
        "admin:approvals_pendingapproval_change", args=[finance.id]
    )
    assert picture["overflowing"] == [] and picture["pageWidth"] <= WIDTH

    squares = worker_picture["items"]
    assert sorted(s["status"] for s in squares) == ["COMPLETED", "WAITING", "WAITING"]
    assert all(s["fill"] == STATUS_COLOURS[s["status"]] for s in squares)
    assert worker_picture["overflowing"] == [] and worker_picture["pageWidth"] <= WIDTH


def test_registered_workflows_page_draws_every_graph(live_server, browser):
    admin = StaffFactory()
    with browser(admin.username) as page:
        page.goto(live_server.url + reverse("admin:workflows_definitions"))
        page.wait_for_selector("[data-graph][data-rendered=true]")
        rendered = page.eval_on_selector_all(
            "[data-graph]",
            "els => els.map(e => [e.dataset.graph, e.dataset.rendered,"
            " e.querySelectorAll('g.hitl-node').length])",
        )
        page.goto(live_server.url + reverse("admin:workflows_definition", args=["test_expense"]))
        page.wait_for_selector("[data-graph][data-rendered=true]")
        page.locator(".hitl-definition").screenshot(path=SCREENSHOTS / "workflow-graph.png")
        width = page.evaluate("document.documentElement.scrollWidth")

    drawn = {graph_id: (state, count) for graph_id, state, count in rendered}
    assert drawn["hitl-graph-test_moderation"] == ("true", 4)
    assert drawn["hitl-graph-test_drafting"] == ("true", 4)
    assert drawn["hitl-graph-test_expense"] == ("true", 12)  # its cluster is no node
    assert {state for state, _ in drawn.values()} == {"true"}  # every registered one
    assert width <= WIDTH


def test_cancel_from_the_monitor_asks_first(live_server, browser):
    admin = StaffFactory()
    target = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    other = services.start("test_expense", {"employee": "Ken", "amount": 600.0})
    url = live_server.url + reverse("admin:workflows_invocation_change", args=[target.pk])

    with browser(admin.username) as page:
        page.goto(url)
        page.click("text=Cancel invocation…")
        confirmation = page.inner_text("#content")
        page.click("input[value='Yes, cancel']")
        message = page.inner_text("ul.messagelist")
        after = page.inner_text("#content")
        page.goto(live_server.url + reverse("admin:workflows_invocation_changelist"))
        list_width = page.evaluate("document.documentElement.scrollWidth")
        page.check(f"input[name=_selected_action][value='{other.pk}']")
        page.select_option("select[name=action]", "cancel_invocations")
        page.click("button[name=index]")
        action_confirmation = page.inner_text("#content")
        page.click("text=No, take me back")
        back_at = page.url

    assert "Cancel 1 invocation(s)?" in confirmation
    assert "node run test_expense@1/manager_approval@1 (WAITING) stops" in confirmation
    assert "Approve an expense of 420.00 for Ada?" in confirmation
    assert "Cancelled 1 invocation(s)." in message
    assert "Cancel invocation…" not in after
    assert "Approve an expense of 600.00 for Ken?" in action_confirmation
    assert back_at.endswith(reverse("admin:workflows_invocation_changelist"))
    assert list_width <= WIDTH
    target.refresh_from_db()
    other.refresh_from_db()
    assert (target.status, other.status) == ("CANCELLED", "WAITING")
    assert set(Interrupt.objects.filter(invocation=target).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert Invocation.objects.filter(status="WAITING").count() == 1
