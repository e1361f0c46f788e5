"""Running a script as a third party verifying receipts would: a fresh interpreter (no
site, no environment) that can import the repository and the directory `cryptography` is
installed in, and refuses Django, Celery, DRF, py_webauthn and cbor2 even from there."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import cryptography

ROOT = Path(__file__).resolve().parents[1]
REFUSED = {"django", "celery", "kombu", "rest_framework", "webauthn", "cbor2"}
PRELUDE = textwrap.dedent(
    f"""
    import json, sys

    class NoFrameworks:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {sorted(REFUSED)!r}:
                raise ImportError(f"{{name}} is not importable here")

    sys.meta_path.insert(0, NoFrameworks())
    sys.path[:0] = sys.argv[1:3]
    """
)


def run_offline(script: str, given: Any) -> Any:
    """What `script` prints (JSON), run with `given` as JSON on its standard input."""
    site = str(Path(cryptography.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-S", "-I", "-c", PRELUDE + textwrap.dedent(script), str(ROOT), site],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
