"""Context: what a node sees of its run; Execution: one drive of one invocation."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections import defaultdict
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import effects
from .errors import GrantUnavailableError, GraphError
from .events import Event, RequestInput
from .nodes import run_inline
from .state import (
    NOT_LOADED,
    EffectRecord,
    GrantUse,
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    WriteBatch,
)
from .status import NodeStatus
from .stepping import complete

if TYPE_CHECKING:
    from .nodes import BaseNode
    from .store import Store


# The path of the node run whose body is running (None outside one): for log records.
current_node_path: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hitl_current_node_path", default=None
)


def child_path(parent_path: str, name: str, run_id: int) -> str:
    segment = f"{name}@{run_id}"
    return f"{parent_path}/{segment}" if parent_path else segment


def new_id() -> str:
    return str(uuid.uuid4())


class Execution:
    """In-memory state of one invocation while the engine drives it.

    Node-run transitions accumulate in `batch`; `flush` commits them as one store write,
    and happens before any node body starts, so every completed step is durable before
    the next one runs.
    """

    def __init__(
        self,
        invocation: InvocationRecord,
        store: Store | None = None,
        node_runs: dict[str, NodeRunState] | None = None,
        interrupts: dict[str, InterruptRecord] | None = None,
        answers: dict[str, Any] | None = None,
        lease_owner: str | None = None,
        max_value_bytes: int | None = None,
        max_value_depth: int | None = None,
    ) -> None:
        self.invocation = invocation
        # Limits per stored value (an output, a payload): bytes encoded, levels of nesting.
        self.max_value_bytes = max_value_bytes
        self.max_value_depth = max_value_depth
        self.store = store
        self.node_runs: dict[str, NodeRunState] = {}
        self.children: dict[str, list[str]] = defaultdict(list)
        self._max_run_id: dict[tuple[str, str], int] = {}
        self.interrupts = dict(interrupts or {})
        self.answers = dict(answers or {})
        self._consumed: set[str] = set()
        self._output_loads: dict[str, asyncio.Future[None]] = {}
        self.progressed = False
        # Node runs in tasks of their own (run alongside siblings), not yet finished.
        self.parallel_runs = 0
        self.lease_owner = lease_owner
        # How synchronous node code runs: the store's `run_sync` if it has one (a database
        # store runs it where blocking database calls are allowed), else inline; the
        # store's optional methods: OptionalStoreCapabilities.
        self.run_sync = getattr(store, "run_sync", None) or run_inline
        self.batch = self._new_batch()
        self._flush_lock = asyncio.Lock()
        # Effect records by node-run path, read once per pass and kept current.
        self.effects: dict[str, dict[str, EffectRecord]] = {}
        # Grant uses a store refused (the grant was no longer live): their gates ask.
        self.refused_grant_uses: list[GrantUse] = []
        # Superseded questions asked again by this pass: {id: the round they open}.
        self.asked_again: dict[str, int] = {}
        self.any_superseded = False  # a rewind left superseded runs (see dynamic_run_id)
        for path, state in (node_runs or {}).items():
            self._index(path, state)
        self.node_runs.update(node_runs or {})

    def _new_batch(self) -> WriteBatch:
        return WriteBatch(self.invocation.id, lease_owner=self.lease_owner)

    def _index(self, path: str, state: NodeRunState) -> None:
        """Index a node run new to this execution (a path's run_id never changes)."""
        self.children[state.parent_path].append(path)
        if state.status == NodeStatus.SUPERSEDED:
            self.any_superseded = True
        key = (state.parent_path, state.name)
        if state.run_id > self._max_run_id.get(key, 0):
            self._max_run_id[key] = state.run_id

    def next_run_id(self, parent_path: str, name: str) -> int:
        run_id = self._max_run_id.get((parent_path, name), 0) + 1
        self._max_run_id[(parent_path, name)] = run_id
        return run_id

    def dynamic_run_id(self, parent_path: str, name: str, call: int) -> int:
        """The run_id of call number `call` of `name` by the dynamic parent at
        `parent_path`: its call-th run not superseded, or a fresh one."""
        if not self.any_superseded:
            return call
        kept = sorted(
            state.run_id
            for path in self.children.get(parent_path, ())
            if (state := self.node_runs[path]).name == name
            and state.status != NodeStatus.SUPERSEDED
        )
        if call <= len(kept):
            return kept[call - 1]
        return self.next_run_id(parent_path, name)

    def save(self, path: str, state: NodeRunState) -> None:
        if path not in self.node_runs:
            self._index(path, state)
        self.node_runs[path] = state
        self.batch.node_runs[path] = state

    def spawn(self, run: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task for a node run that runs alongside its siblings."""
        task = asyncio.ensure_future(run)
        self.parallel_runs += 1
        task.add_done_callback(self._parallel_run_done)
        return task

    def _parallel_run_done(self, task: asyncio.Task[Any]) -> None:
        self.parallel_runs -= 1

    def record(self, event: Event) -> None:
        event.invocation_id = self.invocation.id
        self.batch.events.append(event)

    def consume(self, path: str, interrupt_ids: Any) -> None:
        """Mark as applied the answers that the node run at `path` owns, in the batch of
        the transition that applies them. An ancestor passing answers down applies
        nothing: if it stops before the owner runs, the answers stay for the next pass."""
        if not interrupt_ids:
            return
        fresh = {
            i
            for i in interrupt_ids
            if i in self.answers and i in self.interrupts and self.interrupts[i].path == path
        } - self._consumed
        self._consumed |= fresh
        self.batch.consumed |= fresh

    async def load_outputs(self, parent_path: str) -> None:
        """Fetch the outputs a store left out (NOT_LOADED) of the completed children of
        `parent_path`: once per parent and pass, however many children ask at once."""
        loading = self._output_loads.get(parent_path)
        if loading is None:
            loading = asyncio.ensure_future(self._load_outputs(parent_path))
            self._output_loads[parent_path] = loading
        await asyncio.shield(loading)

    async def _load_outputs(self, parent_path: str) -> None:
        # Only a store that left outputs out (NOT_LOADED) is asked: it has load_outputs.
        store: Any = self.store
        outputs = await store.load_outputs(self.invocation.id, parent_path)
        for path, output in outputs.items():
            state = self.node_runs.get(path)
            if state is not None and state.output is NOT_LOADED:
                self.node_runs[path] = replace(state, output=output)

    def unapplied_answers(self) -> set[str]:
        """Answers loaded for this pass that no owner applied."""
        return set(self.answers) - self._consumed

    async def flush(self) -> bool:
        """Commit the pending transitions; return what the store's commit returns."""
        await self._siblings_first()
        async with self._flush_lock:
            more: bool = (await self._commit_pending(self.store.commit if self.store else None))[1]
            return more

    async def flush_then_call(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Commit the pending transitions, then run synchronous node code: in one trip to
        the store's thread when it offers `commit_then_call` (OptionalStoreCapabilities)."""
        combined = getattr(self.store, "commit_then_call", None)
        if combined is None:
            await self.flush()
            return await self.run_sync(func, *args, **kwargs)
        await self._siblings_first()
        async with self._flush_lock:
            committed, result = await self._commit_pending(
                lambda batch: combined(batch, func, args, kwargs)
            )
            if committed:
                return result
        return await self.run_sync(func, *args, **kwargs)

    async def _commit_pending(
        self, commit: Callable[[WriteBatch], Coroutine[Any, Any, Any]] | None
    ) -> tuple[bool, Any]:
        """Commit the pending batch with `commit` (under the flush lock): (False, False)
        when there is nothing to commit, else (True, what it returned). A grant the store
        finds no longer live is taken out of the batch, with its uses (their gates ask),
        and the rest committed."""
        while True:
            batch = self._take_batch()
            if not batch or commit is None:
                return False, False
            try:
                return True, await complete(commit(batch))
            except GrantUnavailableError as refused:
                uses = batch.grant_uses
                taken = [u for u in uses if u.grant_id == refused.grant_id]
                self.refused_grant_uses += taken
                batch.grant_uses = [u for u in uses if u.grant_id != refused.grant_id]
                for use in taken:
                    self._undecide(batch, use)
                self.batch.put_back(batch)

    def _undecide(self, batch: WriteBatch, use: GrantUse) -> None:
        """A refused grant use takes back the gate outcome it was committed with: the
        node run's gate has not decided (it asks)."""
        state = batch.node_runs.get(use.path)
        if state is None or (state.gate or {}).get("grant") != use.grant_id:
            return
        undecided = replace(state, gate=None)
        batch.node_runs[use.path] = undecided
        if self.node_runs.get(use.path) is state:
            self.node_runs[use.path] = undecided

    async def commit_effect(self, record: EffectRecord) -> None:
        """Durably record `record` (an effect starting), with the effect records waiting
        for the next commit: in a write of their own, apart from node-run transitions."""
        if self.store is not None:
            async with self._flush_lock:
                await complete(self.store.commit(self._effect_batch(record)))
        self.keep_effect(record, durable=True)

    def commit_effect_sync(self, record: EffectRecord) -> None:
        """`commit_effect` from synchronous node code, in the thread the store runs it in."""
        if self.store is not None:
            commit_sync = getattr(self.store, "commit_sync", None)
            if commit_sync is None:
                raise TypeError(
                    f"{type(self.store).__name__} has no commit_sync: use "
                    "`await ctx.effect(...)` in an async node"
                )
            commit_sync(self._effect_batch(record))
        self.keep_effect(record, durable=True)

    def _effect_batch(self, record: EffectRecord) -> WriteBatch:
        pending, self.batch.effects = self.batch.effects, []
        return WriteBatch(
            self.invocation.id, lease_owner=self.lease_owner, effects=[*pending, record]
        )

    def keep_effect(self, record: EffectRecord, *, durable: bool = False) -> None:
        """Note the effect's current record; unless `durable` (committed already), it is
        written with the next commit."""
        self.effects.setdefault(record.path, {})[record.name] = record
        if not durable:
            self.batch.effects.append(record)

    async def _siblings_first(self) -> None:
        if self.parallel_runs:
            # One yield lets siblings dispatched together add their transitions first.
            await asyncio.sleep(0)

    def _take_batch(self) -> WriteBatch | None:
        """The pending batch (None when empty or there is no store), taken for committing
        (under the flush lock: commits happen one at a time, in order)."""
        batch, self.batch = self.batch, self._new_batch()
        if not batch or self.store is None:
            return None
        if batch.node_runs and not self.progressed:
            # The first checkpoint that records progress also shows the invocation
            # RUNNING (a drive with nothing to do writes nothing).
            batch.invocation = batch.invocation or self.invocation
            self.progressed = True
        return batch


class Context:
    """A node run's view of itself: its input binding, answers, output and route.

    Set `ctx.route` to choose outgoing edges; `ctx.resume_inputs` holds
    `{interrupt_id: response}` on resume; `ctx.interrupt_ids` holds the ids the run waits on.
    """

    def __init__(
        self,
        execution: Execution | None = None,
        node: BaseNode | None = None,
        path: str = "",
        run_id: int = 1,
        parent: Context | None = None,
        attempt: int = 1,
    ) -> None:
        if execution is None:
            execution = Execution(InvocationRecord(id=new_id(), workflow_name=""))
        self._execution = execution
        self.node = node
        self.path = path
        self.run_id = run_id
        self.parent = parent
        self.attempt = attempt
        self.output: Any = None
        self.route: str | None = None
        self.resume_inputs: dict[str, Any] = {}
        self.interrupt_ids: set[str] = set()
        self.status = NodeStatus.PENDING
        self.error: str | None = None
        self.checkpoint_due = False  # commit before the body runs (set by the runner)
        self.requests: list[RequestInput] = []  # interrupts raised by this execution
        self.recorded_call_ids: set[str] = set()  # raised by a yielded Event already written
        self._dynamic_run_ids: dict[str, int] = {}
        # Answers to the run's own questions (its gate, its effects in doubt): kept apart
        # from `resume_inputs`, which holds the answers to what its body asked.
        self.own_answers: dict[str, Any] = {}
        self.may_have_effects = False  # ran before: effect records may exist
        self.effect_names: set[str] = set()  # effects of this execution, by name
        # What the run's approval gate decided, as stored with the run (None: not yet, or
        # no gate); `gate` is what the gated body sees of it: {"decision", "args",
        # "original_args", "edited", "reason", "by", "grant"}.
        self.gate_outcome: dict[str, Any] | None = None
        self.gate: dict[str, Any] | None = None

    @property
    def invocation_id(self) -> str:
        return self._execution.invocation.id

    @property
    def node_name(self) -> str:
        return self.node.name if self.node else ""

    async def checkpoint(self) -> None:
        """Commit this run's pending checkpoint, if one is due before its body runs."""
        if self.checkpoint_due:
            self.checkpoint_due = False
            await self._execution.flush()

    async def call_sync(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run synchronous node code through the store (see Execution.run_sync), after the
        run's due checkpoint."""
        if self.checkpoint_due:
            self.checkpoint_due = False
            return await self._execution.flush_then_call(func, args, kwargs)
        return await self._execution.run_sync(func, *args, **kwargs)

    @property
    def idempotency_key(self) -> str:
        """Stable across resumes and retries of this node run: use it to dedupe effects."""
        return f"{self.invocation_id}:{self.path}"

    @property
    def is_resuming(self) -> bool:
        return bool(self.resume_inputs)

    async def effect(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        idempotent: bool = False,
        result_schema: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Perform a side effect once: record that it started, call `fn(*args, **kwargs)`
        (with `idempotency_key=f"{ctx.idempotency_key}:{name}"` when `fn` accepts it), record
        its result, both durably (the finish is committed before this returns), and
        return the result.

        When the node runs again, a finished effect returns its stored result without
        calling `fn`. One that started and never finished (a crash in between) is in doubt:
        with `idempotent=True` it is called again with the same key; otherwise the node asks
        a person whether it happened (`{"happened": bool, "result": ...}`, asked with the
        rules of the node's gate) and goes on from the answer. `result_schema` (a JSON
        Schema, pydantic model or type) makes that answer's `result` required and valid
        when it happened; without one, "it happened" without a result returns None. `fn`
        raising records the effect failed; a re-run calls it again."""
        return await effects.perform(
            self, name, fn, args, kwargs, idempotent=idempotent, result_schema=result_schema
        )

    def effect_sync(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        idempotent: bool = False,
        result_schema: Any = None,
        **kwargs: Any,
    ) -> Any:
        """`effect` for synchronous node bodies (`fn` is a plain function)."""
        return effects.perform_sync(
            self, name, fn, args, kwargs, idempotent=idempotent, result_schema=result_schema
        )

    async def run_node(self, node: Any, node_input: Any = None) -> Any:
        """Run `node` as a dynamic child and return its output.

        When the child interrupts, this returns None and its interrupt ids join this
        node's, so this node ends WAITING and re-runs when they are answered; a child
        that completed earlier returns its stored output without executing again.
        """
        from .nodes import as_node

        if self.node is None or not self.node.rerun_on_resume:
            raise GraphError(
                f"node {self.node_name!r} calls ctx.run_node, so it needs rerun_on_resume=True"
            )
        child = await self.run_child(as_node(node), node_input)
        return child.output if child.status == NodeStatus.COMPLETED else None

    async def run_child(
        self, node: BaseNode, node_input: Any, run_id: int | None = None
    ) -> Context:
        """Run (or resume, or reuse) the child run of `node`; its ids join this run's."""
        from .child_runs import run_child

        if run_id is None:
            # Deterministic per execution, so a re-run maps each call to the same child:
            # the k-th call of a name to the k-th run of it a rewind did not supersede.
            calls = self._dynamic_run_ids.get(node.name, 0) + 1
            self._dynamic_run_ids[node.name] = calls
            run_id = self._execution.dynamic_run_id(self.path, node.name, calls)
        return await run_child(self, node, node_input, run_id)

    def __repr__(self) -> str:
        return f"<Context {self.path} {self.status}>"
