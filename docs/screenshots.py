"""Refresh the pictures in docs/img from the demo project (`make screenshots`).

The demo (hitl_site) runs on a throwaway SQLite database seeded with `seed_demo`, served by
`manage.py runserver` on a free port, and Debian's Chromium (Playwright) takes, as the
staff approver `approver`:

- inbox.png: the approvals inbox;
- decision.png: the decision page of Linus's large expense, a comment typed in (the
  script then approves it, so the monitor shows a finished step beside waiting ones);
- monitor.png: that invocation's monitor;
- workflow-graph.png: the registered expense_approval workflow's graph;
- dashboard.png: the approvals dashboard over the last 90 days.

Beside them it writes screenshots.json: each picture's size and layout (where its landmarks
are: the inbox's view tabs and columns, the decision form, the monitor's graph and tables),
which tests/hitl_site/test_screenshots.py compares with a fresh run, so a picture that no
longer shows the page as it is fails a test rather than waiting for someone to notice.

    python docs/screenshots.py              # writes docs/img/*.png and screenshots.json
    python docs/screenshots.py --out /tmp   # somewhere else

Chromium: $CHROMIUM, else `chromium` on the PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 900
LOGIN = ("approver", "approver")  # a staff approver of seed_demo, not a superuser
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
PICTURES = ("inbox", "decision", "monitor", "workflow-graph", "dashboard")
MANIFEST = "screenshots.json"

# What each picture must show, by CSS selector: how many there are, their text where it
# names something (column headings, view tabs), and where the first one is. A picture taken
# of an older page (no view tabs, other columns) differs here.
LANDMARKS: dict[str, dict[str, tuple[str, bool]]] = {
    "inbox": {
        "sidebar": ("#nav-sidebar", False),
        "views": (".hitl-views a", True),
        "columns": ("#result_list thead th", True),
        "rows": ("#result_list tbody tr", False),
    },
    "decision": {
        "status": (".hitl-status", False),
        "details": (".hitl-payload", False),
        "form": ("#decision-form", False),
        "buttons": ("#decision-form .submit-row input, #decision-form .submit-row button", False),
    },
    "monitor": {
        "graph": ("[data-graph]", False),
        "headings": ("#content h2", True),
    },
    "workflow-graph": {"graph": ("[data-graph]", False)},
    "dashboard": {
        "charts": ("svg.hitl-chart", False),
        "headings": ("#content h2", True),
    },
}

# In the page: {name: {"count", "texts" (or null), "box": [x, y, width, height]}}.
MEASURE = r"""(landmarks) => Object.fromEntries(Object.entries(landmarks).map(
  ([name, [selector, withText]]) => {
    const found = [...document.querySelectorAll(selector)]
      .filter((e) => e.getClientRects().length > 0);
    const first = found.length ? found[0].getBoundingClientRect() : null;
    return [name, {
      count: found.length,
      // An invocation's id differs from run to run; what the text says does not.
      texts: withText ? found.map((e) => e.innerText.trim().replace(/\s+/g, ' ')
        .replace(/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, '<id>')) : null,
      box: first ? [first.x, first.y + window.scrollY, first.width, first.height]
        .map(Math.round) : null,
    }];
  }))"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def demo_environment(database: Path) -> dict[str, str]:
    """The demo's settings on `database`, Celery eager (no broker), nothing else."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="hitl_site.settings",
        SQLITE_PATH=str(database),
        LOG_LEVEL="WARNING",
        DJANGO_LOG_LEVEL="WARNING",
    )
    return env


def manage(env: dict[str, str], *command: str) -> None:
    subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)


@contextmanager
def demo_server(env: dict[str, str]) -> Iterator[str]:
    """`runserver` on a free port until the block ends; yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/admin/login/", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the demo server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def page_paths(env: dict[str, str]) -> dict[str, str]:
    """Paths of the pages shown, read from the seeded database before any browser runs."""
    os.environ.clear()  # the demo's own environment: a DATABASE_URL of the caller's is not it
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django
    from django.db import connections

    django.setup()
    from django.urls import reverse

    from workflows.models import Interrupt

    question = Interrupt.objects.get(
        invocation__input__employee="Linus", path__contains="/manager_approval@"
    )
    paths = {
        "inbox": reverse("admin:approvals_pendingapproval_changelist"),
        "decision": reverse("admin:approvals_pendingapproval_change", args=[question.pk]),
        "monitor": reverse("admin:workflows_invocation_change", args=[question.invocation_id]),
        "graph": reverse("admin:workflows_definition", args=["expense_approval"]),
        "dashboard": reverse("admin:approvals_dashboard") + "?period=90",
    }
    connections.close_all()
    return paths


def take(url: str, paths: dict[str, str], out: Path, chromium: str) -> dict[str, dict]:
    """The pictures, into `out`; returns each one's layout (see LANDMARKS)."""
    from playwright.sync_api import sync_playwright

    layouts: dict[str, dict] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})

        def shoot(name: str, full_page: bool = True) -> None:
            page.screenshot(path=out / f"{name}.png", full_page=full_page)
            layouts[name] = page.evaluate(MEASURE, LANDMARKS[name])

        page.goto(f"{url}/admin/login/")
        page.fill("#id_username", LOGIN[0])
        page.fill("#id_password", LOGIN[1])
        page.click("input[type=submit]")
        page.wait_for_url(f"{url}/admin/")

        page.goto(url + paths["inbox"])
        page.wait_for_selector("#result_list")
        shoot("inbox")

        page.goto(url + paths["decision"])
        page.wait_for_selector("#decision-form")
        page.fill("textarea[name=comment]", "Replaces the broken one; within budget.")
        shoot("decision")
        page.click("#approve")
        page.wait_for_selector("ul.messagelist")

        page.goto(url + paths["monitor"])
        page.wait_for_selector("[data-graph][data-rendered=true]")
        shoot("monitor", full_page=False)

        page.goto(url + paths["graph"])
        page.wait_for_selector("[data-graph][data-rendered=true]")
        page.locator(".hitl-definition").screenshot(path=out / "workflow-graph.png")
        layouts["workflow-graph"] = page.evaluate(MEASURE, LANDMARKS["workflow-graph"])

        page.goto(url + paths["dashboard"])
        page.wait_for_selector("svg.hitl-chart")
        shoot("dashboard")
        browser.close()
    return {
        name: {"size": list(png_size(out / f"{name}.png")), **layouts[name]} for name in PICTURES
    }


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height, from its header (IHDR follows the 8-byte signature)."""
    header = path.read_bytes()[:24]
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def regenerate(out: Path, chromium: str) -> dict[str, dict]:
    """Seed a throwaway demo, serve it and take every picture into `out`, with
    screenshots.json beside them; returns what screenshots.json holds."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hitl-screenshots-") as scratch:
        env = demo_environment(Path(scratch) / "demo.sqlite3")
        manage(env, "migrate", "--verbosity", "0")
        manage(env, "seed_demo")
        paths = page_paths(env)
        with demo_server(env) as url:
            manifest = take(url, paths, out, chromium)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not chromium:
        print("Chromium not found: install it or set CHROMIUM", file=sys.stderr)
        return 1
    regenerate(args.out, chromium)
    for name in PICTURES:
        print(args.out / f"{name}.png")
    print(args.out / MANIFEST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
