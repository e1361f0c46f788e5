"""The optional store methods the engine looks up on its store are all declared in
OptionalStoreCapabilities, and the stores that offer one take the parameters declared."""

import ast
import inspect
from pathlib import Path

import pytest

import workflows.engine
from workflows.engine import InMemoryStore, OptionalStoreCapabilities
from workflows.store import DjangoStore

ENGINE = Path(workflows.engine.__file__).parent
DECLARED = {name for name in vars(OptionalStoreCapabilities) if not name.startswith("_")}


def probed_on_the_store() -> set[str]:
    """The names the engine's modules look up with getattr/hasattr on a store."""
    names = set()
    for path in ENGINE.glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            if call.func.id in ("getattr", "hasattr") and "store" in ast.unparse(call.args[0]):
                names.add(call.args[1].value)
    return names


def test_every_method_the_engine_probes_is_declared():
    probed = probed_on_the_store()
    assert probed, "the engine looks up optional methods on its store"
    assert probed <= DECLARED, f"not in OptionalStoreCapabilities: {sorted(probed - DECLARED)}"


@pytest.mark.parametrize(
    "store",
    [InMemoryStore(), DjangoStore(), DjangoStore(inline=True)],
    ids=["memory", "django", "django-inline"],
)
def test_the_stores_offer_the_declared_parameters(store):
    offered = [name for name in sorted(DECLARED) if hasattr(store, name)]
    assert offered, "each store offers some of the optional methods"
    for name in offered:
        declared = list(inspect.signature(getattr(OptionalStoreCapabilities, name)).parameters)
        assert list(inspect.signature(getattr(store, name)).parameters) == declared[1:], name
