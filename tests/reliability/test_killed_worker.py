"""A worker killed (SIGKILL) while it runs a node body (issue 6, "Found under faults":
recovery took lease + a beat interval, 91 s with the defaults, and needed beat; the
redelivered message was acknowledged with nothing done because the dead run's lease still
looked live). With the default settings and a second worker, the invocation completes
within 15 s of the kill, and nothing checkpointed before the kill runs again."""

from __future__ import annotations

import time

import pytest

from tests.integration.worker import wait_for
from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Invocation

from .workflows import body_runs, read_journal

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

BODY = 2.0  # seconds the slow node sleeps
RECOVERED_WITHIN = 15.0  # seconds from the kill to the invocation's completion


def test_killed_worker_invocation_completes_within_15_seconds(
    postgres, start_worker, journal, beat
):
    workers = [start_worker(), start_worker()]
    invocation = services.start("reliability_slow_step", {"journal": journal, "seconds": BODY})
    (pid, _, _), *_ = wait_for(lambda: body_runs(journal, "slow"), what="the slow body")
    (doomed,) = [w for w in workers if w.process.pid == pid]
    (survivor,) = [w for w in workers if w is not doomed]
    doomed.process.kill()
    doomed.process.wait()
    killed_at = time.monotonic()

    def finished() -> Invocation | None:
        beat.tick()  # whatever periodic recovery the default schedule runs meanwhile
        row = Invocation.objects.get(pk=invocation.pk)
        return row if NodeStatus(row.status).is_final else None

    row = wait_for(finished, timeout=RECOVERED_WITHIN + 15, what="the invocation to finish")
    took = time.monotonic() - killed_at
    print(f"completed {took:.1f} s after the kill; beat ran {beat.runs}")
    assert took < RECOVERED_WITHIN, f"completed {took:.1f} s after the kill"

    assert row.status == NodeStatus.COMPLETED, row.error
    assert (row.output, row.error, row.lease_owner) == ({"slept": BODY}, "", "")
    # The run that took over counted the dead one; having finished, it clears the count
    # (just after its last write, which the test may have seen first).
    wait_for(
        lambda: Invocation.objects.get(pk=invocation.pk).unfinished_deliveries == 0,
        timeout=5,
        what="the finished run to clear the poison count",
    )
    # At least once: the body the kill interrupted ran again, in the other worker; what
    # was checkpointed before the kill (prepare) did not, and nothing ran twice after.
    runs = body_runs(journal, "slow")
    assert [(p, end is not None) for p, _, end in runs] == [
        (doomed.process.pid, False),
        (survivor.process.pid, True),
    ], runs
    assert [e["node"] for e in read_journal(journal)] == [
        *("prepare", "slow"),
        *("slow", "slow", "finish"),
    ]
    assert "ERROR" not in survivor.log(), survivor.log()
