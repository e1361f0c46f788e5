"""The code in docs/engine.md runs, in order, as a reader would paste it."""

import ast
import asyncio
import re
from pathlib import Path

ENGINE_GUIDE = Path(__file__).resolve().parent.parent / "docs" / "engine.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_engine_guide_samples_run():
    blocks = python_blocks(ENGINE_GUIDE.read_text())
    assert len(blocks) >= 5
    namespace: dict = {"__name__": "engine_guide"}

    async def run_all() -> None:
        for number, block in enumerate(blocks, start=1):
            code = compile(
                block, f"engine.md block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                await result

    asyncio.run(run_all())
