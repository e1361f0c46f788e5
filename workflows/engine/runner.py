"""Runner: start, resume, retry and cancel invocations of one workflow on a store."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from .context import Context, Execution, new_id
from .errors import (
    ExecutionAbortedError,
    InterruptNotPendingError,
    InvocationNotFoundError,
    LeaseLostError,
)
from .events import Event, FunctionResponse, RequestInput
from .node_runner import ChildFailedError
from .rewind import Confirmation, RewindPlan, check_rewindable, compute_rewind, plan_rewind
from .state import (
    Checkpoint,
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    RewindReads,
    WriteBatch,
    copied,
)
from .status import InterruptStatus, NodeStatus
from .store import LEASE_TTL, InMemoryStore, Store
from .transitions import (
    accept_responses,
    cancel_batch,
    checked_answer,
    checked_input,
    retry_batch,
)
from .workflow import Workflow


@dataclass
class InvocationResult:
    invocation_id: str
    status: NodeStatus
    output: Any = None
    error: str | None = None
    interrupts: dict[str, RequestInput] = field(default_factory=dict)
    node_runs: dict[str, NodeRunState] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)


class Runner:
    """Runs invocations of `workflow` on `store` (an InMemoryStore unless given)."""

    def __init__(
        self,
        workflow: Workflow,
        store: Store | None = None,
        *,
        lease_ttl: float = LEASE_TTL,
        max_value_bytes: int | None = None,
        max_value_depth: int | None = None,
    ) -> None:
        self.workflow = workflow
        self.store: Store = store if store is not None else InMemoryStore()
        self.lease_ttl = lease_ttl  # seconds; each checkpoint renews the lease
        # Largest input, output, payload or answer stored, encoded (None: no limit).
        self.max_value_bytes = max_value_bytes
        # Deepest nesting of lists and dicts in such a value (None: what Python can encode).
        self.max_value_depth = max_value_depth

    async def run(
        self,
        node_input: Any = None,
        *,
        invocation_id: str | None = None,
        session_id: str | None = None,
    ) -> InvocationResult:
        """Start a new invocation and drive it until it completes, waits or fails."""
        record = InvocationRecord(
            id=invocation_id or new_id(),
            workflow_name=self.workflow.name,
            input=checked_input(node_input, self.max_value_bytes, self.max_value_depth),
            session_id=session_id,
        )
        await self.store.commit(WriteBatch(record.id, invocation=record))
        return await self.drive(record.id)

    async def resume(
        self, function_responses: list[FunctionResponse], *, actor: str | None = None
    ) -> InvocationResult:
        """Accept answers (all validated before anything is stored), then continue."""
        ids = [r.id for r in function_responses]
        while True:
            interrupts = await self.store.load_interrupts(ids)
            acceptance = accept_responses(
                function_responses,
                interrupts,
                actor=actor,
                workflow_name=self.workflow.name,
                now=datetime.now(UTC),
                max_bytes=self.max_value_bytes,
                max_depth=self.max_value_depth,
            )
            try:
                if acceptance.batch:
                    await self.store.commit(acceptance.batch)
                break
            except InterruptNotPendingError:
                continue  # answered concurrently: classify again against the new state
        return await self.drive(acceptance.invocation_id)

    async def retry(self, invocation_id: str) -> InvocationResult:
        """Re-drive a FAILED invocation: failed nodes re-run, completed ones do not."""
        await self.store.commit(retry_batch(await self._checkpoint(invocation_id)))
        return await self.drive(invocation_id)

    async def plan_rewind(self, interrupt_id: str) -> RewindPlan:
        """What `rewind(interrupt_id, ...)` would reopen, supersede and repeat (DESIGN
        3.8): a pure read; refused with the errors `rewind` raises before storing."""
        record, reads, _ = await self._rewind_reads(interrupt_id, lease=False)
        record = check_rewindable(interrupt_id, record, reads, workflow_name=self.workflow.name)
        assert reads is not None
        return plan_rewind(self.workflow, reads, record)

    async def rewind(
        self,
        interrupt_id: str,
        response: Any,
        *,
        actor: str | None = None,
        confirm_effects: Confirmation = False,
    ) -> InvocationResult:
        """Change the answer to `interrupt_id` (DESIGN 3.8): store the rewind in one write
        under the invocation's lease, then drive; only what depended on the old answer
        runs again. Refusals (NotRewindableError, EffectsWouldRepeatError, ...) store
        nothing; an answer equal to the current one changes nothing."""
        record, reads, owner = await self._rewind_reads(interrupt_id, lease=True)
        try:
            record = check_rewindable(interrupt_id, record, reads, workflow_name=self.workflow.name)
            assert reads is not None
            value = checked_answer(
                interrupt_id, response, self.max_value_bytes, self.max_value_depth
            )
            rewind = compute_rewind(
                self.workflow,
                reads,
                record,
                value,
                actor=actor,
                now=datetime.now(UTC),
                confirm_effects=confirm_effects,
            )
            if rewind.batch is not None:
                await self.store.commit(rewind.batch)
        finally:
            if record is not None and reads is not None:
                await self.store.release_lease(record.invocation_id, owner)
        if rewind.batch is None:
            return await self.result(record.invocation_id)
        return await self.drive(record.invocation_id)

    async def _rewind_reads(
        self, interrupt_id: str, *, lease: bool
    ) -> tuple[InterruptRecord | None, RewindReads | None, str]:
        """The question and what its rewind reads; with `lease`, under the invocation's
        execution lease (reads None: another execution holds it)."""
        owner = os.urandom(16).hex()
        record = (await self.store.load_interrupts([interrupt_id])).get(interrupt_id)
        if record is None or record.workflow_name != self.workflow.name:
            return None, None, owner
        if lease:
            taken = await self.store.acquire_lease(record.invocation_id, owner, self.lease_ttl)
            if taken is None:
                return record, None, owner
        reads = await self.store.load_rewind_reads(record.invocation_id, interrupt_id)
        return record, reads, owner

    async def cancel(self, invocation_id: str, *, actor: str | None = None) -> InvocationResult:
        checkpoint = await self._checkpoint(invocation_id)
        await self.store.commit(cancel_batch(checkpoint, actor=actor, now=datetime.now(UTC)))
        return await self.result(invocation_id)

    async def result(self, invocation_id: str) -> InvocationResult:
        checkpoint = await self._checkpoint(invocation_id)
        invocation = checkpoint.invocation
        return InvocationResult(
            invocation_id=invocation.id,
            status=invocation.status,
            output=invocation.output,
            error=invocation.error,
            interrupts={
                i.id: i.request
                for i in checkpoint.interrupts.values()
                if i.status == InterruptStatus.PENDING
            },
            node_runs=checkpoint.node_runs,
            events=await self.store.load_events(invocation_id),
        )

    async def drive(self, invocation_id: str) -> InvocationResult:
        """Advance the invocation (see `advance`) and return its result."""
        await self.advance(invocation_id)
        return await self.result(invocation_id)

    async def advance(
        self,
        invocation_id: str,
        *,
        wait: bool = True,
        leased: tuple[str, Checkpoint] | None = None,
    ) -> bool:
        """Execute whatever the invocation has to do now, under its execution lease.

        With `wait=False`, return False at once when another run holds the lease (that run
        picks up any answer accepted before it releases the lease); else return True.
        `leased`: the lease is taken already, by this owner, with this checkpoint.
        """
        # A new owner: unique, and cheaper than a UUID.
        owner, handed = leased if leased is not None else (os.urandom(16).hex(), None)
        while True:
            checkpoint = handed or await self.store.acquire_lease(
                invocation_id, owner, self.lease_ttl
            )
            handed = None
            if checkpoint is None:
                if not wait:
                    return False
                await asyncio.sleep(0.005)
                continue
            try:
                more = await self._execute_leased(checkpoint, owner)
            except LeaseLostError:
                return True  # another run took the invocation over; it carries on
            except BaseException:
                await self.store.release_lease(invocation_id, owner)
                raise
            if not more:
                return True

    async def _execute_leased(self, checkpoint: Checkpoint, owner: str) -> bool:
        """`_execute`, with a heartbeat renewing the lease every third of its length while
        node bodies run; a run that loses its lease is stopped before its next write.

        A store whose synchronous work blocks this loop offers `keep_alive(invocation_id,
        owner, ttl, on_lost)`, a context manager that renews from a thread of its own;
        otherwise timers on this loop call `renew_lease` (both: OptionalStoreCapabilities).
        The pass runs in this task (a task of its own would cost trips through the loop):
        losing the lease cancels it."""
        keep_alive = getattr(self.store, "keep_alive", None)
        renew = getattr(self.store, "renew_lease", None)
        if keep_alive is None and renew is None:
            return await self._execute(checkpoint, owner)
        invocation_id = checkpoint.invocation.id
        task = asyncio.current_task()
        assert task is not None
        cancelling = task.cancelling()
        running = True
        lost = False

        def stop() -> None:
            nonlocal lost
            if running and not lost:  # never cancel the caller once the pass returned
                lost = True
                task.cancel()

        with contextlib.ExitStack() as beating:
            if keep_alive is not None:
                loop = asyncio.get_running_loop()
                on_lost = partial(loop.call_soon_threadsafe, stop)
                beating.enter_context(keep_alive(invocation_id, owner, self.lease_ttl, on_lost))
            elif renew is not None:
                beating.callback(self._heartbeat(partial(renew, invocation_id, owner), stop))
            try:
                more = await self._execute(checkpoint, owner)
            except asyncio.CancelledError:
                if lost and task.uncancel() <= cancelling:
                    raise LeaseLostError(f"invocation {invocation_id}: lease lost") from None
                raise  # the caller was cancelled: so is the pass
            finally:
                running = False
            if lost:
                task.uncancel()  # the pass ended on its own, ignoring the cancellation
            return more

    def _heartbeat(
        self, renew: Callable[[float], Awaitable[bool | None]], on_lost: Callable[[], None]
    ) -> Callable[[], None]:
        """Call `renew(ttl)` every third of the lease length (no task until a beat is
        due) and `on_lost` when it says the lease is lost; return what stops it."""
        loop = asyncio.get_running_loop()
        interval = self.lease_ttl / 3
        stopped = False
        pending: asyncio.Handle | asyncio.Future[bool | None]

        def beat() -> None:
            nonlocal pending
            pending = asyncio.ensure_future(renew(self.lease_ttl))
            pending.add_done_callback(renewed)

        def renewed(renewal: asyncio.Future[bool | None]) -> None:
            nonlocal pending
            if stopped or renewal.cancelled():
                return
            # An error: cannot tell now (a busy database), ask at the next beat.
            held = None if renewal.exception() else renewal.result()
            if held is False:
                on_lost()
            else:
                pending = loop.call_later(interval, beat)

        def stop() -> None:
            nonlocal stopped
            stopped = True
            pending.cancel()

        pending = loop.call_later(interval, beat)
        return stop

    async def _checkpoint(self, invocation_id: str) -> Checkpoint:
        checkpoint = await self.store.load_checkpoint(invocation_id)
        if checkpoint is None or checkpoint.invocation.workflow_name != self.workflow.name:
            raise InvocationNotFoundError(invocation_id)
        return checkpoint

    async def _execute(self, checkpoint: Checkpoint, lease_owner: str) -> bool:
        """One pass under the lease; gives the lease back and says whether work remains."""
        invocation = checkpoint.invocation
        if invocation.workflow_name != self.workflow.name:
            await self.store.release_lease(invocation.id, lease_owner)
            raise InvocationNotFoundError(invocation.id)
        if invocation.status.is_final:
            return await self.store.release_lease(invocation.id, lease_owner)
        running = copied(invocation, status=NodeStatus.RUNNING)
        execution = Execution(
            running,
            self.store,
            checkpoint.node_runs,
            checkpoint.interrupts,
            checkpoint.answers(),
            lease_owner,
            self.max_value_bytes,
            self.max_value_depth,
        )
        root = Context(execution)
        try:
            ctx = await root.run_child(self.workflow, invocation.input, run_id=1)
            status = NodeStatus.WAITING if ctx.interrupt_ids else NodeStatus.COMPLETED
            output, error = ctx.output, None
        except ChildFailedError as failure:
            status, output, error = NodeStatus.FAILED, None, failure.child.error
        except ExecutionAbortedError:
            return await self.store.release_lease(invocation.id, lease_owner)
        finished = copied(invocation, status=status, output=output, error=error)
        if finished != invocation or execution.progressed or execution.batch.node_runs:
            execution.batch.invocation = finished
        if status != NodeStatus.FAILED:
            # Answers whose node run this pass did not reach wait for a pass that does;
            # marked deferred, they do not make the invocation look stalled. After a
            # failure they stay as they are: a retry applies them.
            execution.batch.deferred |= execution.unapplied_answers()
        execution.batch.release_lease = True
        try:
            return await execution.flush()
        except ExecutionAbortedError:  # cancelled, or the lease expired and was taken over
            return await self.store.release_lease(invocation.id, lease_owner)
