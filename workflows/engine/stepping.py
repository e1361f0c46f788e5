"""Coroutines stepped by hand from the awaiting task, as a task would step them.

A node run or a commit that finishes without waiting then costs no trip through the event
loop, which starting a task does (Python 3.12's eager tasks, by hand for 3.11).
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any


def _step(method: Callable[[Any], Any], value: Any) -> Any:
    return method(value)


@types.coroutine
def _drive(
    coro: Coroutine[Any, Any, Any], yielded: Any, run: Callable[..., Any] = _step
) -> Generator[Any, Any, Any]:
    """Drive `coro`, started and suspended on `yielded`, to its end: what the awaiting
    task sends or throws goes on to `coro`, each step through `run`."""
    method: Callable[[Any], Any]
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation, or what the awaited future raised
            method, value = coro.throw, exc
        else:
            method, value = coro.send, sent
        try:
            yielded = run(method, value)
        except StopIteration as done:
            return done.value


async def run_isolated(coro: Coroutine[Any, Any, Any]) -> Any:
    """Await `coro` in this task but in a copy of the current context, as a child task
    would run it: the context variables it sets stay its own."""
    run = contextvars.copy_context().run
    try:
        yielded = run(coro.send, None)
    except StopIteration as done:
        return done.value
    return await _drive(coro, yielded, run)


async def _finish(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    return await _drive(coro, yielded)


async def complete(awaitable: Awaitable[Any]) -> Any:
    """Await a commit that may hold other runs' outcomes: a cancelled caller must not drop
    it halfway. It starts at once (in a context of its own, as in a task); if it has to
    wait, it finishes in a task, which completes before the cancellation lands."""
    if asyncio.iscoroutine(awaitable):
        context = contextvars.copy_context()
        try:
            yielded = context.run(awaitable.send, None)
        except StopIteration as done:
            return done.value
        loop = asyncio.get_running_loop()
        future = loop.create_task(_finish(awaitable, yielded), context=context)
    else:
        future = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await future
        raise
