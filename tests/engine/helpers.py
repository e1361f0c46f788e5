"""Shared helpers for the engine tests: a checked runner, store snapshots, status maps.

Every scenario drives its workflow through `Harness`, which checks after each `run`,
`resume`, `retry`, `cancel` and `result` that the session events rebuild the same node-run
state as the checkpoint (DESIGN 3.3), and that only leaves carry interrupt events
(DESIGN 3.2).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any

from bench.common import CountingStore  # noqa: F401  # the tests count reads and commits too
from workflows.engine import (
    FunctionResponse,
    InMemoryStore,
    InvocationResult,
    NodeStatus,
    Runner,
    Workflow,
)
from workflows.engine.rebuild import checkpoint_differences
from workflows.engine.state import GrantRecord, GrantUse, InterruptRecord

WAITING = NodeStatus.WAITING
COMPLETED = NodeStatus.COMPLETED
FAILED = NodeStatus.FAILED
CANCELLED = NodeStatus.CANCELLED
PENDING = NodeStatus.PENDING
RUNNING = NodeStatus.RUNNING


class InMemoryBackend:
    """Where scenarios keep their state: an InMemoryStore (tests/engine/conftest.py has
    the database ones)."""

    def new_store(self) -> Any:
        return InMemoryStore()

    def run(self, test: Callable[..., Coroutine[Any, Any, Any]], *args: Any, **kwargs: Any) -> Any:
        return asyncio.run(test(*args, **kwargs))

    async def snapshot(self, store: Any) -> Any:
        """A deep copy of everything the store keeps, to compare before/after."""
        return copy.deepcopy(
            {
                "invocations": {i: asdict(r) for i, r in store.invocations.items()},
                "node_runs": {
                    i: {path: asdict(s) for path, s in runs.items()}
                    for i, runs in store.node_runs.items()
                },
                "events": {i: [asdict(e) for e in events] for i, events in store.events.items()},
                "interrupts": {i: asdict(r) for i, r in store.interrupts.items()},
                "grants": {i: asdict(g) for i, g in store.grants.items()},
                "grant_uses": [asdict(u) for u in store.grant_uses],
                "effects": {k: asdict(e) for k, e in store.effects.items()},
            }
        )

    async def grants(self, store: Any) -> dict[str, GrantRecord]:
        return dict(store.grants)

    async def new_session(self, store: Any) -> str:
        return str(uuid.uuid4())

    async def grant_uses(self, store: Any) -> list[GrantUse]:
        return list(store.grant_uses)


def sync(test: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async test body inside a plain (sync) pytest test, on its `store_backend`."""

    @functools.wraps(test)
    def wrapper(*args: Any, store_backend: Any, **kwargs: Any) -> Any:
        return store_backend.run(test, *args, store_backend=store_backend, **kwargs)

    return wrapper


def check(result: InvocationResult, unapplied: set[str] = frozenset()) -> InvocationResult:
    """Assert the invariants every result must satisfy, and return it. `unapplied`: the
    accepted answers no node run consumed yet."""
    differences = checkpoint_differences(result.events, result.node_runs, unapplied)
    assert differences == [], "events do not rebuild the checkpoint:\n" + "\n".join(differences)
    for event in result.events:
        assert event.invocation_id == result.invocation_id
        if event.long_running_tool_ids:
            # Only the leaf that raised an interrupt writes its event (DESIGN 3.2).
            children = [p for p in result.node_runs if p.startswith(event.path + "/")]
            assert not children, f"interrupt event on non-leaf path {event.path}"
    return result


class Harness:
    """A Runner on a store of `backend` (a new one unless `store` is given) whose every
    result goes through `check`."""

    def __init__(self, workflow: Workflow, backend: Any, store: Any = None) -> None:
        self.backend = backend
        self.store = store if store is not None else backend.new_store()
        self.runner = Runner(workflow, store=self.store)

    async def check(self, result: InvocationResult) -> InvocationResult:
        checkpoint = await self.store.load_checkpoint(result.invocation_id)
        return check(result, set(checkpoint.answers()) if checkpoint else set())

    async def run(self, node_input: Any = None) -> InvocationResult:
        return await self.check(await self.runner.run(node_input))

    async def resume(self, answers: dict[str, Any], name: str = "answer") -> InvocationResult:
        responses = [FunctionResponse(id=i, name=name, response=v) for i, v in answers.items()]
        return await self.check(await self.runner.resume(responses))

    async def resume_frs(self, responses: list[FunctionResponse]) -> InvocationResult:
        return await self.check(await self.runner.resume(responses))

    async def retry(self, invocation_id: str) -> InvocationResult:
        return await self.check(await self.runner.retry(invocation_id))

    async def cancel(self, invocation_id: str) -> InvocationResult:
        return await self.check(await self.runner.cancel(invocation_id))

    async def result(self, invocation_id: str) -> InvocationResult:
        return await self.check(await self.runner.result(invocation_id))

    async def rewind(self, interrupt_id: str, response: Any, **options: Any) -> InvocationResult:
        return await self.check(await self.runner.rewind(interrupt_id, response, **options))

    async def interrupt(self, interrupt_id: str) -> InterruptRecord:
        return (await self.store.load_interrupts([interrupt_id]))[interrupt_id]

    async def snapshot(self) -> Any:
        return await self.backend.snapshot(self.store)


def statuses(result: InvocationResult) -> dict[str, NodeStatus]:
    """{path: status} of every node run of the result."""
    return {path: state.status for path, state in result.node_runs.items()}


def outputs(result: InvocationResult) -> dict[str, Any]:
    return {path: state.output for path, state in result.node_runs.items()}


def interrupt_events(result: InvocationResult) -> list[tuple[str, list[str]]]:
    """(path, long_running_tool_ids) of every interrupt event, in order."""
    return [
        (e.path, list(e.long_running_tool_ids)) for e in result.events if e.long_running_tool_ids
    ]
