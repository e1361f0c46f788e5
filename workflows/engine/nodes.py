"""Node kinds: BaseNode, FunctionNode (and the @node decorator), JoinNode, parallel workers."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from .errors import GraphError
from .status import NodeStatus

if TYPE_CHECKING:
    from .context import Context

START = "START"


@dataclass(frozen=True)
class RetryConfig:
    """Re-run a failing node up to `max_attempts` times (same run_id, attempt + 1).

    `backoff` is the first delay in seconds; it doubles after each attempt, capped at
    `max_backoff`.
    """

    max_attempts: int = 3
    backoff: float = 0.1
    max_backoff: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        return min(self.backoff * 2.0 ** (attempt - 1), self.max_backoff)


async def run_inline(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The default way to run a synchronous node body: in the event loop's thread."""
    return func(*args, **kwargs)


_DONE = object()


async def iterate_call(
    ctx: Context,
    func: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    inline: bool = False,
    is_async: bool | None = None,
) -> AsyncIterator[Any]:
    """Call a node body and turn what it gives (value, awaitable, generator) into the items
    it emits. Synchronous code (a plain function, each step of a generator) runs through
    `ctx.call_sync` (unless `inline`), so a store can run it where blocking calls are
    allowed; the run's checkpoint is committed before any of the body runs. `is_async`:
    `is_async_callable(func)`, when the caller knows it already."""
    kwargs = kwargs or {}
    call_sync = run_inline if inline else ctx.call_sync
    if is_async is None:
        is_async = is_async_callable(func)
    if is_async:
        await ctx.checkpoint()
        if inspect.isasyncgenfunction(func):
            async for item in func(*args, **kwargs):
                yield item
            return
        result = await func(*args, **kwargs)
    else:
        result = await call_sync(func, *args, **kwargs)
    if inspect.isasyncgen(result):
        async for item in result:
            yield item
        return
    if inspect.isgenerator(result):
        while (item := await call_sync(next, result, _DONE)) is not _DONE:
            yield item
        return
    if inspect.isawaitable(result):
        result = await result
    if result is not None:
        yield result


def is_async_callable(func: Callable[..., Any]) -> bool:
    """An async function or async generator function: its body runs on the loop."""
    return inspect.isasyncgenfunction(func) or inspect.iscoroutinefunction(func)


@functools.cache
def _runs_async(run: Callable[..., Any]) -> bool:
    """Whether a node class's `run` (cached per class's function) is async."""
    return is_async_callable(run)


class BaseNode:
    """A unit of work in a workflow. Subclass and implement `run(ctx, node_input)`.

    `run` may return a value (its output), return a RequestInput (an interrupt), or be a
    (async) generator yielding RequestInputs, Events and at most one output value.
    """

    name: str = ""
    rerun_on_resume: bool = False
    retry: RetryConfig | None = None
    # Seconds one execution of the body may take before the node fails (NodeTimeoutError).
    timeout: float | None = None
    # Engine-internal nodes (workflows, joins, workers) run no user code of their own,
    # so nothing needs to be durable before their bodies start.
    checkpoint_before_run: bool = True
    # The output is a child run's output, checked and encoded when the child produced it.
    outputs_a_childs_output: bool = False
    # Nodes the body may run with `ctx.run_node`, declared so that what looks for a
    # workflow's nodes finds them too (the approval gates that grants are made for).
    runs: tuple[BaseNode, ...] = ()

    def __init__(
        self,
        name: str | None = None,
        *,
        rerun_on_resume: bool | None = None,
        retry: RetryConfig | None = None,
        timeout: float | None = None,
    ) -> None:
        self.name = name or self.name or type(self).__name__
        if rerun_on_resume is not None:
            self.rerun_on_resume = rerun_on_resume
        if retry is not None:
            self.retry = retry
        if timeout is not None:
            if timeout <= 0:
                raise GraphError(f"node {self.name!r}: timeout must be positive, got {timeout}")
            self.timeout = timeout
        validate_name(self.name)

    def run(self, ctx: Context, node_input: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(ctx, node_input)")

    def emit(self, ctx: Context, node_input: Any) -> AsyncIterator[Any]:
        """The items one execution of this node emits."""
        return iterate_call(ctx, self.run, (ctx, node_input), is_async=_runs_async(type(self).run))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def validate_name(name: str) -> None:
    if not name or "/" in name or "@" in name or name == START:
        raise GraphError(f"invalid node name {name!r}: must be non-empty, without '/' or '@'")


class FunctionNode(BaseNode):
    """Wraps a plain, async or generator function. Parameters bind by name:
    `node_input` (the predecessor's output) and `ctx` (the node's Context)."""

    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None = None,
        *,
        rerun_on_resume: bool = False,
        retry: RetryConfig | None = None,
        timeout: float | None = None,
        runs: Iterable[Any] = (),
    ) -> None:
        self.func = func
        self.runs = tuple(as_node(child) for child in runs)
        super().__init__(
            name or getattr(func, "__name__", None),
            rerun_on_resume=rerun_on_resume,
            retry=retry,
            timeout=timeout,
        )
        parameters = inspect.signature(func).parameters
        unknown = [
            p.name
            for p in parameters.values()
            if p.name not in ("node_input", "ctx")
            and p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if unknown:
            raise GraphError(
                f"node {self.name!r}: parameters bind by name to 'node_input' and 'ctx'; "
                f"cannot bind {', '.join(unknown)}"
            )
        self._wants_input = "node_input" in parameters
        self._wants_ctx = "ctx" in parameters
        self._is_async = is_async_callable(func)

    def _arguments(self, ctx: Context, node_input: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self._wants_input:
            kwargs["node_input"] = node_input
        if self._wants_ctx:
            kwargs["ctx"] = ctx
        return kwargs

    def run(self, ctx: Context, node_input: Any) -> Any:
        return self.func(**self._arguments(ctx, node_input))

    def emit(self, ctx: Context, node_input: Any) -> AsyncIterator[Any]:
        return iterate_call(
            ctx, self.func, kwargs=self._arguments(ctx, node_input), is_async=self._is_async
        )


class JoinNode(BaseNode):
    """Waits for all its predecessors; outputs `{predecessor_name: output}`."""

    checkpoint_before_run = False

    def __init__(self, name: str = "join") -> None:
        super().__init__(name)

    def run(self, ctx: Context, node_input: Any) -> Any:
        return node_input

    def emit(self, ctx: Context, node_input: Any) -> AsyncIterator[Any]:
        # A join only gathers inputs: its body runs inline, never through the store.
        return iterate_call(
            ctx, self.run, (ctx, node_input), inline=True, is_async=_runs_async(type(self).run)
        )


class ParallelWorker(BaseNode):
    """Maps `item_node` over a list input; each item is a child run named like the worker
    (`.../W@1/W@3` is the third item). Outputs results in input order."""

    rerun_on_resume = True
    checkpoint_before_run = False

    def __init__(self, item_node: BaseNode) -> None:
        self.item_node = item_node
        super().__init__(item_node.name)

    async def run(self, ctx: Context, node_input: Any) -> Any:
        items = list(node_input or ())
        tasks = [
            ctx._execution.spawn(ctx.run_child(self.item_node, item, run_id=index + 1))
            for index, item in enumerate(items)
        ]
        try:
            children = await asyncio.gather(*tasks)
        except BaseException:
            # gather does not cancel the other items when one fails: do it here.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if all(child.status == NodeStatus.COMPLETED for child in children):
            return [child.output for child in children]
        return None


def as_node(value: Any) -> BaseNode:
    """Accept a node or a bare function wherever a node is expected."""
    if isinstance(value, BaseNode):
        return value
    if callable(value):
        return FunctionNode(value)
    raise GraphError(f"{value!r} is not a node or a function")


@overload
def node(func: Callable[..., Any], /) -> BaseNode: ...
@overload
def node(
    *,
    name: str | None = None,
    rerun_on_resume: bool = False,
    parallel_worker: bool = False,
    retry: RetryConfig | None = None,
    timeout: float | None = None,
    runs: Iterable[Any] = (),
) -> Callable[[Callable[..., Any]], BaseNode]: ...
def node(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    rerun_on_resume: bool = False,
    parallel_worker: bool = False,
    retry: RetryConfig | None = None,
    timeout: float | None = None,
    runs: Iterable[Any] = (),
) -> Any:
    """Make a function a node: `@node` or `@node(name=..., rerun_on_resume=..., ...)`.
    `timeout`: seconds one execution may take before the node fails. `runs`: the nodes
    its body may run with `ctx.run_node` (declared, they count among the workflow's)."""

    def wrap(f: Callable[..., Any]) -> BaseNode:
        function_node = FunctionNode(
            f, name, rerun_on_resume=rerun_on_resume, retry=retry, timeout=timeout, runs=runs
        )
        return ParallelWorker(function_node) if parallel_worker else function_node

    return wrap(func) if func is not None else wrap
