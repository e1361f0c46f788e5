"""NodeRunner: runs one node run (fresh, resumed or retried) and checkpoints its outcome."""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .context import Context, child_path, current_node_path, new_id
from .errors import (
    DuplicateInterruptError,
    ExecutionAbortedError,
    NodeOutputError,
    NodeTimeoutError,
)
from .events import DefaultResponse, Event, FunctionCall, RequestInput
from .nodes import BaseNode
from .questions import QuestionRaised, own_answers
from .schema import check_schema, to_json_schema
from .state import InterruptRecord, NodeRunState
from .status import InterruptStatus, NodeStatus
from .values import (
    MAX_INTERRUPT_ID_LENGTH,
    MAX_ROUTE_LENGTH,
    check_text,
    clean_text,
    to_json_value,
)

# Prior statuses after which a run that only keeps waiting writes no event: its last
# outcome event (if any) already says WAITING.
_SILENT_WAIT_AFTER = {None, NodeStatus.PENDING, NodeStatus.WAITING}


def _taken_id(request: RequestInput) -> str:
    """The id of a request `_interrupt` took in: it gives every one an id."""
    assert request.interrupt_id is not None
    return request.interrupt_id


class ChildFailedError(Exception):
    """A child run failed; its error event is already written on the child's path."""

    def __init__(self, child: Context):
        self.child = child
        super().__init__(child.error)


class NodeRunner:
    """Runs `node` as a child of `parent_ctx`.

    On resume, pass the run's `run_id`, its `prior_output` and its still-unresolved
    `prior_interrupt_ids`; `run(resume_inputs=...)` then follows the node's
    `rerun_on_resume` policy.
    """

    def __init__(
        self,
        *,
        node: BaseNode,
        parent_ctx: Context | None = None,
        run_id: int | None = None,
        prior_output: Any = None,
        prior_interrupt_ids: set[str] | frozenset[str] | list[str] | None = None,
        attempt: int | None = None,
    ) -> None:
        self.node = node
        self.parent_ctx = parent_ctx if parent_ctx is not None else Context()
        self.run_id = run_id
        self.prior_output = prior_output
        self.prior_interrupt_ids = set(prior_interrupt_ids or ())
        self.attempt = attempt
        self._prior_status: NodeStatus | None = None
        # Set when the run opens (`_open`): what every checkpoint of it repeats.
        self._node_input: Any = None
        self._resume_inputs: dict[str, Any] = {}
        self._lineage: str | dict[str, str] | None = None
        self._prior_route: str | None = None
        self._carried_ids: set[str] = set()

    async def run(
        self, *, node_input: Any = None, resume_inputs: dict[str, Any] | None = None
    ) -> Context:
        """The run, step by step: open it from its prior state; auto-complete it from its
        answers (3.4); else execute its body, attempt after attempt; record its outcome."""
        ctx, goes_on = self._open(node_input, dict(resume_inputs or {}))
        if ctx.resume_inputs and not self.node.rerun_on_resume and not goes_on:
            return self._complete_from_answers(ctx)
        while True:
            self._start_attempt(ctx)
            try:
                await self._execute_in_time(ctx, node_input)
                self._check_outcome(ctx)
                await self._check_new_interrupts(ctx)
            except ExecutionAbortedError:
                raise
            except asyncio.CancelledError:
                self._cancelled(ctx)
                raise
            except ChildFailedError as failure:
                # Only the failing leaf records an error; ancestors fail through it.
                self._save(ctx, NodeStatus.FAILED)
                ctx.error = failure.child.error
                return ctx
            except Exception as exc:  # a node body may raise anything
                if await self._try_again(ctx, exc):
                    continue
                return ctx
            break
        self._save(ctx, NodeStatus.WAITING if ctx.interrupt_ids else NodeStatus.COMPLETED)
        self._record_outcome(ctx)
        return ctx

    def _open(self, node_input: Any, resume_inputs: dict[str, Any]) -> tuple[Context, bool]:
        """The run's Context from its prior state (if any), its answers applied; and
        whether an answer to one of its own questions, new to it, lets it go on."""
        parent = self.parent_ctx
        execution = parent._execution
        node = self.node
        run_id = self.run_id or execution.next_run_id(parent.path, node.name)
        path = child_path(parent.path, node.name, run_id)
        prior = execution.node_runs.get(path)
        self._prior_status = prior.status if prior else None
        self._node_input, self._resume_inputs = node_input, resume_inputs
        self._lineage = prior.triggered_by if prior else None
        self._prior_route = prior.route if prior else None
        self._carried_ids = self.prior_interrupt_ids - resume_inputs.keys()

        attempt = self.attempt or (prior.attempt if prior else 1)
        ctx = Context(execution, node, path, run_id, parent, attempt)
        # Answers to the run's own questions (gate, effects in doubt) are not its body's.
        ctx.own_answers = own_answers(ctx.idempotency_key, resume_inputs)
        ctx.resume_inputs = {i: v for i, v in resume_inputs.items() if i not in ctx.own_answers}
        ctx.may_have_effects = prior is not None and prior.status != NodeStatus.PENDING
        ctx.gate_outcome = prior.gate if prior else None  # decided once per run
        goes_on = bool(ctx.own_answers.keys() - (prior.resume_inputs if prior else {}).keys())
        execution.consume(path, resume_inputs)
        return ctx, goes_on

    def _save(
        self, ctx: Context, status: NodeStatus, error: str | None = None, detail: str | None = None
    ) -> None:
        """Checkpoint the run with `status`. `error`: the one-line message; `detail`: what
        the node run keeps (the traceback of a body that raised)."""
        ctx.status = status
        ctx.error = error
        if status.is_final:
            # A finished run waits on nothing (ids it raised before failing were never
            # opened); on retry its still-pending ids come from the index.
            ctx.interrupt_ids = set()
        ctx._execution.save(
            ctx.path,
            NodeRunState(
                status=status,
                run_id=ctx.run_id,
                output=ctx.output,
                interrupt_ids=set(ctx.interrupt_ids),
                attempt=ctx.attempt,
                name=self.node.name,
                parent_path=self.parent_ctx.path,
                input=self._node_input,
                route=ctx.route,
                resume_inputs=self._resume_inputs,
                error=detail or error,
                gate=ctx.gate_outcome,
                triggered_by=self._lineage,
            ),
        )

    def _complete_from_answers(self, ctx: Context) -> Context:
        """rerun_on_resume=False (3.4): wait on what is still missing, or complete with
        the answer (several: by id) without executing."""
        ctx.route = self._prior_route
        ctx.interrupt_ids = self._carried_ids
        if self._carried_ids:
            ctx.output = self.prior_output
            self._save(ctx, NodeStatus.WAITING)
            return ctx
        values = list(ctx.resume_inputs.values())
        ctx.output = values[0] if len(values) == 1 else dict(ctx.resume_inputs)
        self._save(ctx, NodeStatus.COMPLETED)
        self._record_outcome(ctx)
        return ctx

    def _start_attempt(self, ctx: Context) -> None:
        ctx.output, ctx.route = self.prior_output, self._prior_route
        ctx.interrupt_ids = set(self._carried_ids)
        self._save(ctx, NodeStatus.RUNNING)
        # Committed before the body starts (with its first step, when the store can).
        ctx.checkpoint_due = self.node.checkpoint_before_run

    def _cancelled(self, ctx: Context) -> None:
        ctx.output, ctx.route = self.prior_output, self._prior_route  # nothing half-made
        self._save(ctx, NodeStatus.CANCELLED)
        self._record_outcome(ctx)

    async def _try_again(self, ctx: Context, exc: Exception) -> bool:
        """Record the body's error; True after the retry's backoff when an attempt is
        left, else False with the run FAILED."""
        error = clean_text(f"{type(exc).__name__}: {exc}")
        retry = self.node.retry
        delay = None
        if retry is not None and ctx.attempt < retry.max_attempts:
            delay = retry.delay(ctx.attempt)
        ctx._execution.record(
            Event(
                author=self.node.name,
                path=ctx.path,
                run_id=ctx.run_id,
                error=error,
                status=NodeStatus.FAILED if delay is None else None,
            )
        )
        if delay is None:
            # A run that failed produced nothing (what it made may not be storable).
            ctx.output, ctx.route = self.prior_output, self._prior_route
            detail = clean_text("".join(traceback.format_exception(exc)))
            self._save(ctx, NodeStatus.FAILED, error, detail)
            return False
        await asyncio.sleep(delay)
        ctx.attempt += 1
        # What the failed attempt raised and did is not the next one's.
        ctx.requests, ctx.recorded_call_ids, ctx.effect_names = [], set(), set()
        return True

    async def _execute_in_time(self, ctx: Context, node_input: Any) -> None:
        token = current_node_path.set(ctx.path)
        try:
            await self._execute_with_timeout(ctx, node_input)
        finally:
            current_node_path.reset(token)

    async def _execute_with_timeout(self, ctx: Context, node_input: Any) -> None:
        timeout = self.node.timeout
        if timeout is None:
            await self._execute(ctx, node_input)
            return
        try:
            async with asyncio.timeout(timeout) as deadline:
                await self._execute(ctx, node_input)
        except TimeoutError:
            if not deadline.expired():
                raise  # the body's own TimeoutError
        else:
            # A synchronous body that a store runs on this loop's thread cannot be
            # interrupted: it times out when it returns past its deadline.
            when = deadline.when()
            if when is None or asyncio.get_running_loop().time() < when:
                return
        raise NodeTimeoutError(f"node {self.node.name!r} timed out after {timeout:g} s")

    def _check_outcome(self, ctx: Context) -> None:
        """Refuse, as this node's failure, what no store could keep (see values.py)."""
        name = self.node.name
        if not self.node.outputs_a_childs_output:
            limit, depth = ctx._execution.max_value_bytes, ctx._execution.max_value_depth
            ctx.output = to_json_value(ctx.output, f"the output of node {name!r}", limit, depth)
        if ctx.route is not None:
            check_text(str(ctx.route), f"the route of node {name!r}", MAX_ROUTE_LENGTH)

    async def _execute(self, ctx: Context, node_input: Any) -> None:
        try:
            await self._emit(ctx, node_input)
        except QuestionRaised as asked:  # the body cannot go on before this is answered
            self._interrupt(ctx, asked.request)

    async def _emit(self, ctx: Context, node_input: Any) -> None:
        outputs = 0
        async for item in self.node.emit(ctx, node_input):
            if isinstance(item, RequestInput):
                self._interrupt(ctx, item)
                continue
            if isinstance(item, Event):
                for call_id in item.long_running_tool_ids:
                    call = next((c for c in item.function_calls if c.id == call_id), None)
                    if call is None:
                        raise ValueError(f"long_running_tool_ids names {call_id!r}, no call has it")
                    self._interrupt(
                        ctx,
                        RequestInput(call_id, payload={"name": call.name, "args": call.args}),
                        recorded=True,
                    )
                if item.route is not None:
                    ctx.route = item.route
                self._record(ctx, self._storable_event(ctx, item))
                if item.output is None:
                    continue
                item = item.output
            outputs += 1
            if outputs > 1:
                raise NodeOutputError(f"node {self.node.name!r} produced a second output")
            ctx.output = item

    @staticmethod
    def _storable_event(ctx: Context, event: Event) -> Event:
        """An event the node yielded, its values encoded as every store keeps them (the
        engine's own outcome events carry values encoded already)."""
        what = f"an event of node {ctx.node_name!r}"
        limit, depth = ctx._execution.max_value_bytes, ctx._execution.max_value_depth
        event.output = to_json_value(event.output, what, limit, depth)
        event.function_calls = [
            FunctionCall(c.id, c.name, to_json_value(c.args, what, limit, depth))
            for c in event.function_calls
        ]
        return event

    @staticmethod
    def _record(ctx: Context, event: Event) -> None:
        event.author = event.author or ctx.node_name
        event.path, event.run_id = ctx.path, ctx.run_id
        ctx._execution.record(event)

    @staticmethod
    def _interrupt(ctx: Context, request: RequestInput, recorded: bool = False) -> None:
        what = f"an interrupt of node {ctx.node_name!r}"
        limit, depth = ctx._execution.max_value_bytes, ctx._execution.max_value_depth
        on_timeout = request.on_timeout
        if isinstance(on_timeout, DefaultResponse):
            on_timeout = DefaultResponse(to_json_value(on_timeout.response, what, limit, depth))
        interrupt_id = check_text(
            request.interrupt_id or new_id(), f"{what}: its id", MAX_INTERRUPT_ID_LENGTH
        )
        request = replace(
            request,
            interrupt_id=interrupt_id,
            message=check_text(str(request.message or ""), f"{what}: its message"),
            payload=to_json_value(request.payload, what, limit, depth),
            response_schema=to_json_value(
                to_json_schema(request.response_schema), what, max_depth=depth
            ),
            on_timeout=on_timeout,
        )
        check_schema(request.response_schema)
        if recorded:
            ctx.recorded_call_ids.add(interrupt_id)
        ctx.requests.append(request)
        ctx.interrupt_ids.add(interrupt_id)

    async def _check_new_interrupts(self, ctx: Context) -> None:
        """Fail the run on an id another node run holds, or on a quorum the store says its
        assignees cannot reach; keep re-raised pending ids."""
        execution = ctx._execution
        fresh: list[RequestInput] = []
        unknown: list[str] = []
        for request in ctx.requests:
            interrupt_id = _taken_id(request)
            held = execution.interrupts.get(interrupt_id)
            if held is None:
                unknown.append(interrupt_id)
            elif held.status == InterruptStatus.SUPERSEDED:
                unknown.append(interrupt_id)  # its id is free: asked again, a new round
            elif held.path != ctx.path or held.status != InterruptStatus.PENDING:
                raise DuplicateInterruptError(interrupt_id, f"{held.path}")
            else:
                continue
            fresh.append(request)
        if unknown and execution.store is not None:
            existing = await execution.store.load_interrupts(unknown)
            for interrupt_id, held in existing.items():
                if held.status == InterruptStatus.SUPERSEDED:
                    execution.asked_again[interrupt_id] = held.round + 1
                    continue
                raise DuplicateInterruptError(interrupt_id, f"{held.path} of {held.invocation_id}")
        quorums = [r for r in fresh if r.quorum > 1 and r.assignees]
        check_assignees = getattr(execution.store, "check_assignees", None) if quorums else None
        if check_assignees is not None:
            await check_assignees(execution.invocation.id, quorums)
        ctx.requests = fresh

    def _record_outcome(self, ctx: Context) -> None:
        """Write the run's outcome event, and the interrupt rows it opened."""
        execution = ctx._execution
        status = ctx.status
        if status == NodeStatus.WAITING:
            now = datetime.now(UTC)
            for request in ctx.requests:
                record = InterruptRecord(
                    id=_taken_id(request),
                    invocation_id=execution.invocation.id,
                    workflow_name=execution.invocation.workflow_name,
                    path=ctx.path,
                    run_id=ctx.run_id,
                    request=request,
                    deadline=now + request.timeout if request.timeout else None,
                    asked_at=now,
                    round=execution.asked_again.get(_taken_id(request), 1),
                )
                execution.interrupts[record.id] = record
                execution.batch.new_interrupts.append(record)
            calls = [
                r.as_function_call()
                for r in ctx.requests
                if r.interrupt_id not in ctx.recorded_call_ids
            ]
            if (
                not calls
                and ctx.output is None
                and not ctx.requests
                and self._prior_status in _SILENT_WAIT_AFTER
            ):
                # Waiting on descendants or on ids its events already show: nothing to
                # record. After a failed or cancelled outcome, the WAITING event is
                # written so the events rebuild the new state.
                return
            event = Event(
                function_calls=calls,
                long_running_tool_ids=[c.id for c in calls],
                output=ctx.output,
                route=ctx.route,
            )
        else:
            event = Event(output=ctx.output, route=ctx.route)
        event.status = status
        self._record(ctx, event)
