"""The library tests run on a project of their own (tests/project), not on the demo project
hitl_site (issue 6): a change to the demo's settings or workflows cannot break them or
hide a library fault. Only the demo's own tests (tests/hitl_site) use it."""

import ast
import re
from pathlib import Path

from django.conf import settings

from workflows.registry import registry

TESTS = Path(__file__).resolve().parent
DEMO = "hitl_site"
# A dotted name in the demo: an import, a settings module, a `celery -A` app.
DEMO_NAME = re.compile(rf"^{DEMO}(\.|$)")


def demo_references(path: Path) -> list[str]:
    """Where a module imports the demo or names one of its modules in a string."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            continue
        found += [
            f"{path.relative_to(TESTS)}:{node.lineno}: {n}" for n in names if DEMO_NAME.match(n)
        ]
    return found


def test_no_library_test_imports_or_runs_the_demo():
    library_modules = [
        path
        for path in TESTS.rglob("*.py")
        if DEMO not in path.relative_to(TESTS).parts and path != Path(__file__)
    ]
    assert len(library_modules) > 50  # the walk found the test tree
    references = [ref for path in library_modules for ref in demo_references(path)]
    assert references == []


def test_the_test_settings_install_neither_the_demo_app_nor_its_urls():
    assert settings.SETTINGS_MODULE == "tests.project.settings"
    assert DEMO not in settings.INSTALLED_APPS
    assert not settings.ROOT_URLCONF.startswith(DEMO)
    assert settings.HITL["WORKFLOW_MODULES"] == ["tests.project.workflows"]
    # The demo's tests register its workflows for their own duration only.
    assert {"test_expense", "test_moderation", "test_drafting"} <= {
        definition.name for definition in registry.definitions()
    }
    assert not {"expense_approval", "content_moderation", "document_drafting"} & {
        definition.name for definition in registry.definitions()
    }


def test_the_demo_tests_import_the_demo_only_when_they_run():
    # Importing the demo makes its Celery app current: at collection, that would send every
    # later test's tasks through the demo's app (its fixture imports it and restores ours).
    demo_tests = sorted((TESTS / DEMO).glob("*.py"))
    assert demo_tests
    at_module_level = []
    for path in demo_tests:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            at_module_level += [f"{path.name}:{node.lineno}" for n in names if DEMO_NAME.match(n)]
    assert at_module_level == []
