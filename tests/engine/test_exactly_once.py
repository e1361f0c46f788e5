"""Exactly once: an accepted answer is applied by the node run that owns its interrupt,
never lost to a failure elsewhere, and never applied twice (issue: exactly once, for real)."""

import asyncio

import pytest

from workflows.engine import JoinNode, RequestInput, Workflow, node

from .helpers import COMPLETED, FAILED, WAITING, Harness, statuses, sync

# The store conformance suite: every test once per store (conftest.py: store_backend).
pytestmark = pytest.mark.usefixtures("store_backend")


def _review_and_check_workflow(fail_check: dict[str, bool]) -> Workflow:
    """drafting re-runs on resume and, after an await, resumes its child `review`; its
    sibling `check` fails on resume while drafting is still awaiting (when failing)."""

    @node
    def review(node_input):
        return RequestInput(interrupt_id="review-q", message="review?")

    @node(rerun_on_resume=True)
    async def drafting(ctx, node_input):
        if ctx.is_resuming and fail_check["fail"]:
            await asyncio.Event().wait()  # still awaiting when the sibling fails
        reviewed = await ctx.run_node(review, node_input)
        return None if reviewed is None else {"reviewed": reviewed}

    @node(rerun_on_resume=True)
    def check(ctx, node_input):
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id="check-q", message="check?")
        if fail_check["fail"]:
            raise RuntimeError("check service down")
        return {"checked": ctx.resume_inputs["check-q"]}

    join = JoinNode()
    return Workflow(name="wf", edges=[("START", drafting, join), ("START", check, join)])


@sync
async def test_answer_survives_a_sibling_failure_and_is_applied_on_retry(store_backend):
    fail_check = {"fail": True}
    h = Harness(_review_and_check_workflow(fail_check), store_backend)
    first = await h.run("doc")
    assert first.status == WAITING
    assert set(first.interrupts) == {"review-q", "check-q"}

    failed = await h.resume({"review-q": "looks good", "check-q": "ok"})
    assert failed.status == FAILED
    # The sibling's failure stopped drafting before its child applied the answer: the
    # answer must still be waiting to be applied.
    assert not (await h.interrupt("review-q")).consumed

    fail_check["fail"] = False
    done = await h.retry(failed.invocation_id)
    assert done.status == COMPLETED, statuses(done)
    assert done.output == {"drafting": {"reviewed": "looks good"}, "check": {"checked": "ok"}}
    assert (await h.interrupt("review-q")).consumed
    assert (await h.interrupt("check-q")).consumed


@sync
async def test_answers_accepted_after_a_failure_rebuild_from_events(store_backend):
    """Two branches wait; answering the first makes it fail; the second is answered while
    the invocation is FAILED: the checkpoint still agrees with the events."""

    @node(rerun_on_resume=True)
    def first(ctx):
        if not ctx.resume_inputs:
            return RequestInput(interrupt_id="q1")
        raise RuntimeError("boom")

    @node
    def second():
        return RequestInput(interrupt_id="q2")

    h = Harness(Workflow(name="wf", edges=[("START", first), ("START", second)]), store_backend)
    started = await h.run()
    failed = await h.resume({"q1": 1})
    assert failed.status == FAILED
    still_failed = await h.resume({"q2": 2})  # Harness checks events against checkpoint
    assert still_failed.status == FAILED
    q2 = await h.interrupt("q2")
    assert q2.response == 2 and not q2.consumed
    assert started.invocation_id == still_failed.invocation_id
