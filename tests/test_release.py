"""What a release ships besides the code: the version a user reads at run time, the
changelog entry for it, and type information for both apps."""

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def run_python(code: str) -> str:
    """Run `code` in a fresh interpreter on this checkout; what it prints."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_version_is_the_installed_distributions():
    import workflows

    assert workflows.__version__ == importlib.metadata.version(PROJECT["name"])


def test_version_of_a_checkout_that_is_not_installed():
    printed = run_python(
        "import importlib.metadata as metadata\n"
        "def missing(name):\n"
        "    raise metadata.PackageNotFoundError(name)\n"
        "metadata.version = missing\n"
        "import workflows\n"
        "print(workflows.__version__)\n"
    )
    assert printed == "0+unknown"


def test_importing_the_engine_does_not_read_the_version():
    # Reading package metadata costs tens of milliseconds: only asking for it pays that.
    printed = run_python(
        "import sys\nimport workflows.engine\nprint('importlib.metadata' in sys.modules)\n"
    )
    assert printed == "False"


def test_changelog_records_the_version_being_released():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2}$", changelog, re.MULTILINE)
    assert released, "no released version in CHANGELOG.md"
    assert released[0] == PROJECT["version"]
    assert changelog.index("## Unreleased") < changelog.index(f"## {released[0]} ")


def test_both_apps_ship_type_information():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in package_data["package-data"]["*"]
    for app in ("workflows", "approvals"):
        assert (ROOT / app / "py.typed").is_file(), f"{app}/py.typed is missing"
