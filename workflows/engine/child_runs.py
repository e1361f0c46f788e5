"""A child run of a parent: started fresh, resumed, re-driven or reused from its
checkpoint (what `Workflow`, dynamic parents and workers call for each child)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import Context, child_path
from .node_runner import ChildFailedError, NodeRunner
from .state import NOT_LOADED, NodeRunState
from .status import InterruptStatus, NodeStatus

if TYPE_CHECKING:
    from .context import Execution
    from .nodes import BaseNode


async def run_child(parent: Context, node: BaseNode, node_input: Any, run_id: int) -> Context:
    """Run, resume, re-drive or reuse the child run `<parent>/<node>@<run_id>`."""
    execution: Execution = parent._execution
    path = child_path(parent.path, node.name, run_id)
    prior = execution.node_runs.get(path)
    if prior is None:
        child = await NodeRunner(node=node, parent_ctx=parent, run_id=run_id).run(
            node_input=node_input
        )
    elif prior.status == NodeStatus.COMPLETED or (
        prior.status == NodeStatus.WAITING
        and not any(i in execution.answers for i in prior.interrupt_ids)
    ):
        if prior.output is NOT_LOADED:  # a completed child reused: its output is needed
            await execution.load_outputs(parent.path)
            prior = execution.node_runs[path]
        child = context_from_state(parent, node, path, prior)
    else:
        prior_ids = prior.interrupt_ids
        if prior.status.is_final:
            # A failed or cancelled run stores no ids; on retry it still waits on its
            # interrupts that are pending or answered since (those become resume inputs).
            prior_ids = {
                i
                for i, record in execution.interrupts.items()
                if record.path == path
                and (record.status == InterruptStatus.PENDING or i in execution.answers)
            }
        resume_inputs = dict(prior.resume_inputs)
        resume_inputs.update((i, execution.answers[i]) for i in prior_ids if i in execution.answers)
        # A retry re-runs what failed; only a run that raised itself counts an attempt.
        retried = prior.status == NodeStatus.FAILED and prior.error is not None
        child = await NodeRunner(
            node=node,
            parent_ctx=parent,
            run_id=run_id,
            prior_output=prior.output,
            prior_interrupt_ids=prior_ids,
            attempt=prior.attempt + 1 if retried else prior.attempt,
        ).run(node_input=prior.input, resume_inputs=resume_inputs)
    parent.interrupt_ids |= child.interrupt_ids
    if child.status == NodeStatus.FAILED:
        raise ChildFailedError(child)
    return child


def context_from_state(parent: Context, node: BaseNode, path: str, state: NodeRunState) -> Context:
    """A Context describing a stored run that does not execute now."""
    ctx = Context(parent._execution, node, path, state.run_id, parent, state.attempt)
    ctx.status = state.status
    ctx.output = state.output
    ctx.route = state.route
    ctx.interrupt_ids = set(state.interrupt_ids)
    ctx.resume_inputs = dict(state.resume_inputs)
    ctx.error = state.error
    ctx.gate_outcome = state.gate
    return ctx
