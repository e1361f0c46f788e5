"""What the docs say about the code: every setting and check documented, no citation of the
design document, install commands that name this version's wheel. That their code blocks
run is tests/hitl_site/test_docs_run.py's (against the demo's seed)."""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_reference_documents_every_setting_and_system_check():
    from workflows.conf import DEFAULTS

    reference = (DOCS / "reference.md").read_text()
    undocumented = [key for key in DEFAULTS if f"| `{key}` |" not in reference]
    assert undocumented == [], f"HITL keys missing from docs/reference.md: {undocumented}"
    code = "\n".join(
        path.read_text()
        for app in ("workflows", "approvals")
        for path in (DOCS.parent / app).glob("*.py")
    )
    check_ids = sorted(set(re.findall(r'id="((?:workflows|approvals)\.[EW]\d+)"', code)))
    assert check_ids, "no system check found"
    missing = [check for check in check_ids if f"| `{check}` |" not in reference]
    assert missing == [], f"system checks missing from docs/reference.md: {missing}"


def user_facing_pages() -> dict[str, str]:
    pages = {path.name: path.read_text() for path in DOCS.glob("*.md")}
    pages["README.md"] = (DOCS.parent / "README.md").read_text()
    return pages


def test_docs_state_the_rules_instead_of_citing_the_design_document():
    citing = [name for name, text in user_facing_pages().items() if "DESIGN" in text]
    assert citing == [], f"pages citing DESIGN, which readers do not have: {citing}"


def test_install_commands_name_the_wheel_this_checkout_builds():
    """The package is not on an index: every pip install names the wheel of this version."""
    version = re.search(r'^version = "(.+)"', (DOCS.parent / "pyproject.toml").read_text(), re.M)
    wheel = f"dist/django_hitl_workflows-{version[1]}-py3-none-any.whl["
    for name, text in user_facing_pages().items():
        for command in re.findall(r"^pip install .*$", text, flags=re.MULTILINE):
            assert wheel in command, f"{name}: {command}"
