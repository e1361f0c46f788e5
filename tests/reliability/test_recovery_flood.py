"""`recover_stalled` (the beat task) re-enqueues each stalled invocation at most once per
HITL["STALLED_AFTER_SECONDS"], however often it runs while nobody picks the work up
(issue 6, "Found under faults": it sent 61-75 messages for 26 invocations within 6 s).

Runs on the real clock: beat calls it without `now`."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.integration.worker import QUEUE, purge, queue_length, wait_for
from tests.project.celery import app as celery_app
from workflows import services
from workflows.engine.status import NodeStatus
from workflows.models import Invocation

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

STALLED_AFTER = 2
BACKLOG = 12
TICK = 0.1


def tick_for(seconds: float) -> list[int]:
    """Run recovery every TICK seconds for `seconds`, as an eager beat would; what each
    run reported sending."""
    sent = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        sent.append(services.recover_stalled())
        time.sleep(TICK)
    return sent


@override_settings(HITL={"STALLED_AFTER_SECONDS": STALLED_AFTER})
def test_recover_stalled_enqueues_each_invocation_once_per_stall_period(postgres, celery_broker):
    # A backlog whose run tasks were lost, and no worker: every message recovery sends
    # stays on the queue to be counted.
    started = [services.start("reliability_approval", {"what": n}) for n in range(BACKLOG)]
    assert purge(celery_app) == BACKLOG
    assert {i.status for i in Invocation.objects.all()} == {NodeStatus.PENDING}

    newest = max(i.updated_at for i in Invocation.objects.all())
    wait_for(
        lambda: timezone.now() > newest + timedelta(seconds=STALLED_AFTER + 0.1),
        what="the whole backlog to count as stalled",
    )
    assert services.recover_stalled() == BACKLOG
    # Beat keeps ticking for most of a stall period; nobody picks the work up.
    sent = tick_for(STALLED_AFTER * 0.75)
    assert len(sent) > 5
    assert queue_length(celery_app, QUEUE) == BACKLOG, (
        f"each stalled invocation enqueued once, not once per tick (later ticks sent {sent})"
    )

    # Still not picked up a stall period later: recovery sends each of them once more (the
    # work is not forgotten), and again only once.
    sent = tick_for(STALLED_AFTER)
    assert sum(sent) == BACKLOG, sent
    assert queue_length(celery_app, QUEUE) == 2 * BACKLOG
    assert {i.pk for i in Invocation.objects.all()} == {i.pk for i in started}
