"""The code blocks of README.md and docs/, and a runner that executes them as a reader would.

Every `python` and `sh` block runs, unless the line just before its fence says why not:

    <!-- not run: needs the server running -->

A page's blocks run in order, in one namespace (a block may use what an earlier one
defined), in one working directory (a file a shell block writes, a later block reads).
Python blocks run in a process set up with the demo project's settings, against the demo's
seeded database, as pasted into `python manage.py shell` (or, for a page whose blocks use
a top-level `await`, into `python -m asyncio`); shell blocks run in bash with `python` the
interpreter running the tests and `manage.py` the demo's.

Run as a script: `doc_blocks.py RESULTS PAGE...` runs each page and writes, as JSON, how
many blocks of each ran and the error that stopped it (the settings come from the
environment: DJANGO_SETTINGS_MODULE and the demo's variables).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>.+) -->$")
RUNNABLE = ("python", "sh")
SHELL_SECONDS = 120


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    not_run: str | None  # the reason given in the marker, or None: the block runs

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[str]:
    """README.md and every page of docs/, as paths relative to the repository."""
    return ["README.md", *sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))]


def blocks(page: str) -> list[Block]:
    """The page's `python` and `sh` blocks, in order, each with its marker's reason."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for fence in FENCE.finditer(text):
        if fence[1] not in RUNNABLE:
            continue
        before = text[: fence.start()].splitlines()
        marker = NOT_RUN.match(before[-1].strip()) if before else None
        found.append(
            Block(
                page=page,
                line=len(before) + 1,
                language=fence[1],
                code=fence[2],
                not_run=marker["reason"] if marker else None,
            )
        )
    return found


def compiled(block: Block) -> CodeType:
    """The block's code, a top-level `await` allowed (its flags then say CO_COROUTINE)."""
    return compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def run_python(block: Block, namespace: dict) -> object:
    """Execute the block in `namespace`; a coroutine when it has a top-level await."""
    return eval(compiled(block), namespace)  # the repository's own documentation


def has_top_level_await(block: Block) -> bool:
    return bool(compiled(block).co_flags & inspect.CO_COROUTINE)


def run_shell(block: Block, workdir: Path) -> None:
    """Run the block with bash in `workdir`, stopping at the first failing command."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=SHELL_SECONDS,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(
            f"{block.name}: exit status {result.returncode}\n{result.stdout}{result.stderr}"
        )


def run_page(page: str, workdir: Path) -> int:
    """Run the page's blocks that are not marked; how many ran. Raises at the first error."""
    runnable = [block for block in blocks(page) if block.not_run is None]
    namespace: dict = {"__name__": "__main__"}

    def step(block: Block) -> object:
        if block.language == "sh":
            return run_shell(block, workdir)
        return run_python(block, namespace)

    if any(b.language == "python" and has_top_level_await(b) for b in runnable):

        async def run_all() -> None:  # python -m asyncio: one event loop for the page
            for block in runnable:
                result = step(block)
                if inspect.iscoroutine(result):
                    await result

        asyncio.run(run_all())
    else:  # manage.py shell: no event loop, so the ORM may be used
        for block in runnable:
            step(block)
    return len(runnable)


def main(results: Path, chosen: list[str]) -> None:
    import django

    django.setup()
    workdir = results.parent / "cwd"
    workdir.mkdir(exist_ok=True)
    manage = workdir / "manage.py"
    if not manage.exists():
        manage.symlink_to(ROOT / "manage.py")
    outcome = {}
    for page in chosen:
        os.chdir(workdir)
        try:
            outcome[page] = {"ran": run_page(page, workdir), "error": None}
        except BaseException:  # reported for this page; the next page still runs
            outcome[page] = {"ran": None, "error": traceback.format_exc()}
    results.write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
