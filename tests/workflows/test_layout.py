"""The package layout holds: every module of workflows and approvals imports, nothing but
the Celery app's autodiscovery imports `workflows.tasks` (the rest enqueues by task name),
and workflows' top-level modules import each other without a circle (the engine counts as
one module: it imports nothing of the Django half)."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workflows", "approvals")
TASKS = "workflows.tasks"


def module_files() -> dict[str, Path]:
    """Every module of PACKAGES by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = module_files()


def imported_modules(name: str, path: Path) -> set[str]:
    """The modules of PACKAGES that `name` imports anywhere in its source (inside functions
    too), relative imports resolved; `from package import module` names the module."""
    is_package = path.name == "__init__.py"
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            imported.add(source)
            imported.update(f"{source}.{alias.name}" for alias in node.names)
    return {module for module in imported if module in MODULES}


def top_level(module: str) -> str | None:
    """The top-level module of workflows that `module` belongs to (None: not in workflows,
    or the package itself)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "workflows" and len(parts) > 1 else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`, each as the path that closes it."""
    found, state = [], dict.fromkeys(graph, "new")

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                found.append([*path[path.index(target) :], target])
            elif state.get(target) == "new":
                visit(target, [*path, target])
        state[node] = "done"

    for node in sorted(graph):
        if state[node] == "new":
            visit(node, [node])
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module):
    assert importlib.import_module(module).__name__ == module


def test_only_the_celery_autodiscovery_imports_the_tasks_module():
    importers = sorted(
        module for module, path in MODULES.items() if TASKS in imported_modules(module, path)
    )
    assert importers == [], f"{importers} import {TASKS}: enqueue by name (workflows.dispatch)"


def test_the_top_level_modules_of_workflows_import_no_circle():
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        source = top_level(module)
        if source is None:
            continue
        targets = {top_level(target) for target in imported_modules(module, path)}
        graph.setdefault(source, set()).update(t for t in targets if t not in (None, source))
    assert {"services", "worker", "dispatch", "admin", "engine"} <= set(graph)
    assert "worker" in graph["services"]  # the re-exported worker names are seen
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    # The detector itself: a circle that exists only inside a function is found.
    source = tmp_path / "services.py"
    source.write_text("def later():\n    from . import tasks\n")
    assert imported_modules("workflows.services", source) == {"workflows", "workflows.tasks"}
    assert cycles({"services": {"tasks"}, "tasks": {"services"}}) == [
        ["services", "tasks", "services"]
    ]


def test_web_processes_find_the_tasks_by_name_without_importing_them():
    # In a fresh process: the request side loads without workflows.tasks; the first
    # enqueue finds the run task through the Celery app's autodiscovery.
    script = (
        "import sys, django; django.setup()\n"
        "import workflows.services, workflows.worker, workflows.webhooks, workflows.admin\n"
        "import workflows.api.urls, approvals.admin\n"
        f"assert {TASKS!r} not in sys.modules, 'imported before any enqueue'\n"
        "from workflows import dispatch\n"
        "print(dispatch.registered_task(dispatch.RUN_INVOCATION).name)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.project.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["workflows.tasks.run_invocation"]
