"""Every code block of README.md and docs/ runs, as a reader would run it, against the demo's
seed, unless the line before it says `<!-- not run: reason -->` (doc_blocks.py says how).
One seeded database serves the whole module: the pages run in one process, in order."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hitl_site.doc_blocks import NOT_RUN, ROOT, blocks, pages

# The demo's variables that would point it at services: the run is SQLite, eager, local.
SERVICES = ("DATABASE_URL", "CELERY_BROKER_URL", "HITL_AUDIT_SIGNING_KEY", "SQLITE_PATH")
SECONDS = 600


def run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SECONDS, check=False
    )
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Migrate and seed a fresh demo database, then run every page's blocks on it."""
    base = tmp_path_factory.mktemp("docs-run")
    env = {name: value for name, value in os.environ.items() if name not in SERVICES}
    env.update(
        DJANGO_SETTINGS_MODULE="hitl_site.settings",
        SQLITE_PATH=str(base / "db.sqlite3"),
        AUDIT_SIGNING_KEY_FILE=str(base / "audit-signing.pem"),
        PYTHONPATH=str(ROOT),
        LOG_LEVEL="WARNING",
        DJANGO_LOG_LEVEL="WARNING",
    )
    run([sys.executable, "manage.py", "migrate", "-v", "0"], env)
    run([sys.executable, "manage.py", "seed_demo"], env)
    results = base / "results.json"
    run([sys.executable, "-m", "tests.hitl_site.doc_blocks", str(results), *pages()], env)
    return json.loads(results.read_text())


@pytest.mark.parametrize("page", pages())
def test_the_pages_blocks_run(page: str, outcome: dict[str, dict]) -> None:
    assert outcome[page]["error"] is None, outcome[page]["error"]
    assert outcome[page]["ran"] == sum(block.not_run is None for block in blocks(page))


def test_most_blocks_run_and_every_python_block_parses() -> None:
    found = [block for page in pages() for block in blocks(page)]
    running = [block for block in found if block.not_run is None]
    assert len(running) >= 45, "the runner found too few blocks: is the fence pattern right?"
    for block in found:
        if block.language == "python":
            compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_every_marker_is_spelled_one_way_and_stands_before_a_block() -> None:
    for page in pages():
        lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if re.match(r"\s*<!--\s*not[ -]run", line, flags=re.IGNORECASE):
                assert NOT_RUN.match(line.strip()), f"{page}:{number}: {line!r}"
                assert lines[number].startswith("```"), f"{page}:{number}: no block after it"


def test_a_marked_block_is_not_run_and_a_failing_one_names_its_page(tmp_path: Path) -> None:
    """The runner itself: a marker skips a block; an error stops the page and says where."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run: fails on purpose -->\n```python\nraise SystemExit(3)\n```\n"
        "```python\nx = 1\n```\n```sh\ntest 1 -eq 2\n```\n"
    )
    relative = os.path.relpath(page, ROOT)
    found = blocks(relative)
    assert [block.not_run for block in found] == ["fails on purpose", None, None]
    results = tmp_path / "results.json"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.project.settings",
        "PYTHONPATH": str(ROOT),
    }
    run([sys.executable, "-m", "tests.hitl_site.doc_blocks", str(results), relative], env)
    error = json.loads(results.read_text())[relative]["error"]
    assert f"{relative}:8: exit status 1" in error
