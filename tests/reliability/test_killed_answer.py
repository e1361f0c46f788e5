"""A process killed while it accepts an answer (SIGKILL; eager mode, where the answer and
its run happen in the process that answers): killed after the answer's writes, its audit
entry and its run's lease were sent and before their COMMIT, nothing is stored and the
question is answered again as if never answered; killed after the COMMIT and before the
run, the answer is kept once and recovery runs the invocation to its end once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.integration.worker import PROJECT_ROOT, test_database_url, wait_for
from workflows import services
from workflows.audit.verify import verify
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Interrupt, Invocation, NodeRun, SessionEvent

pytestmark = pytest.mark.postgres

APPROVED = {"approved": True}


def answer_and_die(interrupt_id: str, where: str) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.project.settings",
    }
    command = [sys.executable, "-m", "tests.reliability.dying_answer", interrupt_id, where]
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode(errors="replace")


def asked() -> Interrupt:
    invocation = services.start("reliability_approval", {"what": "the laptop"})
    return Interrupt.objects.get(invocation=invocation)


def accepted_entries(question: Interrupt) -> int:
    return AuditEntry.objects.filter(interrupt_id=question.pk, action="answer.accepted").count()


def test_killed_before_the_commit_nothing_is_stored_and_the_answer_can_be_given(postgres):
    question = asked()
    answer_and_die(question.pk, "before-commit")
    stored = Interrupt.objects.get(pk=question.pk)
    assert (stored.status, stored.response) == (InterruptStatus.PENDING, None)
    assert accepted_entries(question) == 0
    row = Invocation.objects.get(pk=question.invocation_id)
    assert (row.status, row.lease_owner) == (NodeStatus.WAITING, "")
    assert not SessionEvent.objects.filter(invocation=row, author="user").exists()
    services.submit_function_responses(
        [{"id": question.pk, "name": "approve", "response": APPROVED}]
    )
    row = Invocation.objects.get(pk=question.invocation_id)
    assert (row.status, row.output) == (NodeStatus.COMPLETED, APPROVED)
    assert accepted_entries(question) == 1
    assert verify(row.pk).ok


def test_killed_after_the_commit_the_answer_is_kept_once_and_recovery_finishes(postgres):
    question = asked()
    answer_and_die(question.pk, "after-commit")
    stored = Interrupt.objects.get(pk=question.pk)
    assert (stored.status, stored.response) == (InterruptStatus.RESOLVED, APPROVED)
    assert accepted_entries(question) == 1
    row = Invocation.objects.get(pk=question.invocation_id)
    assert row.status == NodeStatus.WAITING and row.lease_owner, "leased for a run that died"
    wait_for(
        lambda: Invocation.objects.get(pk=row.pk).lease_expires_at < timezone.now(),
        timeout=10,
        what="the dead run's lease to expire",
    )
    with override_settings(HITL={"STALLED_AFTER_SECONDS": 0}):
        assert services.recover_stalled() == 1
    row = Invocation.objects.get(pk=row.pk)
    assert (row.status, row.output) == (NodeStatus.COMPLETED, APPROVED)
    assert [r.status for r in NodeRun.objects.filter(invocation=row, name="record")] == [
        NodeStatus.COMPLETED
    ]
    assert accepted_entries(question) == 1
    assert SessionEvent.objects.filter(invocation=row, author="user").count() == 1
    assert verify(row.pk).ok
