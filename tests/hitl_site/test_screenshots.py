"""The docs' pictures (docs/img, `make screenshots`) show the pages as they are: each one
committed with its size and layout in docs/img/screenshots.json, and a fresh run of
docs/screenshots.py lays the pages out the same way (the same landmarks, the inbox's view
tabs and columns among them, in the same places), measured rather than looked at."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflows.test_admin_browser import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "img"
sys.path.insert(0, str(ROOT / "docs"))
from screenshots import MANIFEST, PICTURES, png_size  # noqa: E402

SHIFT = 16  # px a landmark may move sideways or grow (fonts, a longer name)
STRETCH = 0.15  # of the picture's height: how much longer a page may grow (the seed's times)


def committed() -> dict[str, dict]:
    return json.loads((IMAGES / MANIFEST).read_text())


def test_every_picture_is_committed_with_the_size_its_layout_was_measured_at():
    manifest = committed()
    assert sorted(manifest) == sorted(PICTURES)
    for name in PICTURES:
        assert list(png_size(IMAGES / f"{name}.png")) == manifest[name]["size"], name


def test_the_docs_show_only_pictures_that_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    shown = {
        (page.parent / link).resolve()
        for page in pages
        for link in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page.read_text())
    }
    assert {path for path in shown if not path.exists()} == set()
    assert {IMAGES / "inbox.png", IMAGES / "decision.png"} <= shown


def differences(fresh: dict[str, dict], old: dict[str, dict]) -> list[str]:
    """What a fresh run lays out differently from the committed pictures, as sentences."""
    found = []
    for name in PICTURES:
        (width, height), (old_width, old_height) = fresh[name]["size"], old[name]["size"]
        if width != old_width or abs(height - old_height) > SHIFT + STRETCH * old_height:
            found.append(f"{name}: {width}x{height} px, committed {old_width}x{old_height} px")
        drift = SHIFT + STRETCH * old_height
        for landmark, was in old[name].items():
            if landmark == "size":
                continue
            now = fresh[name].get(landmark)
            where = f"{name}'s {landmark}"
            if now is None or (now["count"], now["texts"]) != (was["count"], was["texts"]):
                found.append(f"{where}: {now} now, committed {was}")
                continue
            if (now["box"] is None) != (was["box"] is None):
                found.append(f"{where} is at {now['box']}, committed at {was['box']}")
            elif now["box"]:
                x, y, w, h = now["box"]
                old_x, old_y, old_w, old_h = was["box"]
                if (
                    max(abs(x - old_x), abs(w - old_w)) > SHIFT
                    or max(abs(y - old_y), abs(h - old_h)) > drift
                ):
                    found.append(f"{where} is at {now['box']}, committed at {was['box']}")
    return found


@pytest.mark.browser
def test_make_screenshots_lays_the_pages_out_as_the_committed_pictures_show(tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    pytest.importorskip("playwright.sync_api")
    env = {**os.environ, "CHROMIUM": CHROMIUM}
    subprocess.run(
        [sys.executable, "docs/screenshots.py", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )
    fresh = json.loads((tmp_path / MANIFEST).read_text())
    assert differences(fresh, committed()) == [], "run `make screenshots` and commit docs/img"


def test_a_picture_of_an_older_inbox_is_told_apart():
    # The guard itself: the inbox before its view tabs and priority column fails the check.
    old = committed()
    older_inbox = json.loads(json.dumps(old))
    older_inbox["inbox"]["views"] = {"count": 0, "texts": [], "box": None}
    older_inbox["inbox"]["columns"]["texts"] = [
        text for text in old["inbox"]["columns"]["texts"] if "PRIORITY" not in text
    ]
    older_inbox["inbox"]["columns"]["count"] -= 1
    assert len(differences(old, older_inbox)) == 2
    taller = json.loads(json.dumps(old))
    taller["monitor"]["size"][1] *= 2
    assert differences(old, taller) == ["monitor: 1280x900 px, committed 1280x1800 px"]
    assert differences(old, old) == []
