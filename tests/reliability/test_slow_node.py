"""A node body slower than the execution lease, with two workers and recovery running
(issue 6, defect 2 and "Found under faults": the body started 5 times, up to 2 at once,
and the invocation ended FAILED as poison though no worker died).

The worker running the body renews its lease while the body runs, so neither a second
delivery of the run task nor recovery can start the body again: it starts exactly once."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.integration.worker import wait_for
from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Invocation, NodeRun
from workflows.tasks import run_invocation

from .workflows import body_runs, read_journal

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

LEASE = 10  # seconds: the default of HITL["LEASE_SECONDS"], pinned
BODY = 25  # seconds the slow node sleeps: 2.5 leases
RECOVERY_TICK = 1.0  # seconds between recovery runs here (more often than beat schedules it)


def test_node_slower_than_its_lease_runs_once_with_two_workers_and_recovery(
    postgres, start_worker, journal, monkeypatch
):
    monkeypatch.setenv("HITL_TEST_LEASE_SECONDS", str(LEASE))
    workers = [start_worker(), start_worker()]

    # Recovery treats anything unleased and quiet for a second as stalled.
    with override_settings(HITL={"LEASE_SECONDS": LEASE, "STALLED_AFTER_SECONDS": 1}):
        invocation = services.start("reliability_slow_step", {"journal": journal, "seconds": BODY})
        wait_for(lambda: body_runs(journal, "slow"), what="the slow body to start")
        # A second delivery of the run task (a redelivery, or the run of a concurrent
        # answer) reaches the other worker while the body runs.
        run_invocation.apply_async(args=[str(invocation.pk)])

        def finished() -> Invocation | None:
            services.recover_stalled()
            row = Invocation.objects.get(pk=invocation.pk)
            return row if NodeStatus(row.status).is_final else None

        try:
            row = wait_for(
                finished, timeout=BODY + 3 * LEASE, interval=RECOVERY_TICK, what="the invocation"
            )
        finally:
            runs = body_runs(journal, "slow")
            assert len(runs) == 1, f"the slow body started once, not {len(runs)} times: {runs}"
    (pid, started, ended) = runs[0]
    assert ended is not None and ended - started >= BODY
    assert pid in {w.process.pid for w in workers}
    assert [e["node"] for e in read_journal(journal)] == ["prepare", "slow", "slow", "finish"]

    assert row.status == NodeStatus.COMPLETED, row.error
    assert (row.output, row.error, row.lease_owner) == ({"slept": BODY}, "", "")
    assert row.unfinished_deliveries == 0
    slow = NodeRun.objects.get(invocation=invocation, path="reliability_slow_step@1/slow@1")
    assert (slow.status, slow.attempt) == (NodeStatus.COMPLETED, 1)
    for worker in workers:
        assert "ERROR" not in worker.log(), worker.log()
