"""The package layout holds: every module of workflows and approvals imports, nothing but
the Celery app's autodiscovery imports `workflows.tasks` (the rest enqueues by task name),
workflows' top-level modules import each other without a circle (the engine counts as
one module: it imports nothing of the Django half), every import goes down the layers of
DESIGN section 2 (or stays in its layer), and docs/architecture.md names every module."""

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
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# DESIGN section 2's layers, bottom up: a module imports its own layer and those below,
# never one above. The named parts of DESIGN's chain (engine -> models -> principals,
# signals, registry -> store, policy -> audit, transactions -> dispatch -> services,
# worker, webhooks, notifications -> tasks, admin, api, approvals) with every other
# top-level module of workflows placed where what it imports puts it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("engine",),
    # plain helpers that know no table: settings, the periodic jobs' list, a graph's picture
    ("conf", "datetimes", "expressions", "schedule", "graph", "task_mode"),
    ("models",),
    ("principals", "signals", "registry"),
    ("store", "policy"),
    # the audit trail; the read side and the checks the write path builds on
    ("audit", "transactions", "arguments", "sessions", "backends", "inbox"),
    ("dispatch", "log"),
    ("services", "worker", "webhooks", "notifications", "health"),
    # the doors, and what Django loads: none is imported from below
    ("tasks", "admin", "api", "approvals", "protocols", "management", "checks", "apps"),
    ("migrations",),
)
LAYER_OF = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
# Imports up the layers that are the design, each with its reason: (importer, imported).
UPWARD_IMPORTS: dict[tuple[str, str], str] = {}


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


def layer_part(module: str) -> str | None:
    """The part of LAYERS `module` belongs to: its top-level module of workflows, or
    "approvals" (None: the package `workflows` itself)."""
    return "approvals" if module.split(".")[0] == "approvals" else top_level(module)


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


def test_every_top_level_module_has_a_layer():
    parts = {layer_part(module) for module in MODULES} - {None}
    assert sorted(parts - set(LAYER_OF)) == [], "add it to LAYERS"
    assert sorted(set(LAYER_OF) - parts) == [], "LAYERS names a module that is gone"


def upward_imports() -> list[str]:
    """Each import (at module level or in a function) of a higher layer's module."""
    found = []
    for module, path in sorted(MODULES.items()):
        source = layer_part(module)
        for target in sorted(imported_modules(module, path)):
            imported = layer_part(target)
            if source is None or imported is None or (source, imported) in UPWARD_IMPORTS:
                continue
            if LAYER_OF[imported] > LAYER_OF[source]:
                found.append(f"{module} imports {target} ({source} is below {imported})")
    return found


def test_imports_go_down_the_layers():
    assert upward_imports() == []


def test_the_layer_check_sees_an_upward_import_inside_a_function(tmp_path, monkeypatch):
    # The check itself: policy asking the services from inside a function is found.
    source = tmp_path / "answers.py"
    source.write_text("def later():\n    from ..services import claims\n")
    monkeypatch.setitem(MODULES, "workflows.policy.answers", source)
    assert upward_imports() == [
        "workflows.policy.answers imports workflows.services (policy is below services)",
        "workflows.policy.answers imports workflows.services.claims (policy is below services)",
    ]


def named_in_architecture(module: str, path: Path, text: str) -> bool:
    """Whether docs/architecture.md names `module`: by its dotted path, its file path, or,
    on one line (a row of its table), its package's folder and its file name."""
    relative = path.relative_to(ROOT).as_posix()
    folder = relative.rsplit("/", 1)[0] + "/"
    if path.name == "__init__.py":
        return f"`{folder}" in text or f"`{module}`" in text
    if f"`{module}`" in text or relative in text:
        return True
    return any(f"`{folder}" in line and f"`{path.name}`" in line for line in text.splitlines())


def test_the_architecture_page_names_every_module():
    # The map a maintainer reads first stays true: a new module is placed on it. The
    # migrations are generated and listed by Django; they are left out.
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [
        module
        for module, path in sorted(MODULES.items())
        if ".migrations" not in module and not named_in_architecture(module, path, text)
    ]
    assert missing == [], f"docs/architecture.md does not name {missing}"
