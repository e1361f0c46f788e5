"""`workflows/engine` is framework-free: no Django, Celery, DRF or kombu imports (DESIGN 2)."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE_DIR = ROOT / "workflows" / "engine"
ENGINE_PACKAGE = "workflows.engine"
FORBIDDEN = frozenset({"django", "celery", "rest_framework", "kombu"})


def _engine_files() -> list[Path]:
    assert ENGINE_DIR.is_dir(), f"{ENGINE_DIR} does not exist"
    files = sorted(ENGINE_DIR.rglob("*.py"))
    assert files, f"no .py files under {ENGINE_DIR}"
    assert (ENGINE_DIR / "__init__.py").is_file(), f"{ENGINE_DIR} has no __init__.py"
    return files


def _module_package(path: Path) -> str:
    """Dotted package that relative imports in `path` are resolved against."""
    # For both a module and a package's __init__.py, that is the containing directory.
    return ".".join(path.relative_to(ROOT).parent.parts)


def _resolve_relative(package: str, module: str | None, level: int) -> str:
    base = package.split(".")
    if level - 1 > 0:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT)
    package = _module_package(path)
    found: list[str] = []

    def check(name: str, lineno: int, what: str) -> None:
        top = name.split(".")[0]
        if top in FORBIDDEN:
            found.append(f"{rel}:{lineno}: {what} (imports {top!r})")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name, node.lineno, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                check(node.module or "", node.lineno, f"from {node.module} import ...")
            else:
                target = _resolve_relative(package, node.module, node.level)
                if target != ENGINE_PACKAGE and not target.startswith(ENGINE_PACKAGE + "."):
                    dots = "." * node.level
                    found.append(
                        f"{rel}:{node.lineno}: from {dots}{node.module or ''} import ... "
                        f"(relative import leaves {ENGINE_PACKAGE}: {target})"
                    )
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            if (
                name in {"import_module", "__import__"}
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                check(node.args[0].value, node.lineno, f"{name}({node.args[0].value!r})")
    return found


def test_engine_sources_import_no_framework():
    violations = [v for path in _engine_files() for v in _violations(path)]
    assert not violations, "framework imports in workflows/engine:\n" + "\n".join(violations)


def test_importing_engine_loads_no_framework():
    _engine_files()
    script = textwrap.dedent(
        f"""
        import sys
        import {ENGINE_PACKAGE}
        forbidden = {sorted(FORBIDDEN)!r}
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
        if loaded:
            print("loaded: " + ", ".join(loaded))
            sys.exit(1)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, (
        f"importing {ENGINE_PACKAGE} loaded framework modules:\n{result.stdout}{result.stderr}"
    )
