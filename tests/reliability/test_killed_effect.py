"""A worker killed (SIGKILL) while an approved gated node runs, inside its effect's function
after the provider charged, before the effect's result was recorded: after recovery an
idempotent effect is called again with the same idempotency key, and a non-idempotent one
is not repeated: the node asks a person whether it happened, and goes on from the answer.
The gate decided once: a charge that passed on a grant revoked before recovery is followed
by the question whether it happened, never by the gate's question again."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.integration.worker import wait_for
from workflows import services
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Effect, Grant, GrantUse, Interrupt, Invocation

from .workflows import read_journal

pytestmark = [pytest.mark.postgres, pytest.mark.broker]

WORK = 30.0  # seconds the first charge takes to return: the kill lands in them


def charges(journal: str) -> list[dict]:
    return [e for e in read_journal(journal) if e["what"] == "charged"]


def approve_and_kill(
    start_worker, journal: str, *, idempotent: bool, grant: Grant | None = None
) -> Invocation:
    """Start two workers and the gated charge, approve it (or let `grant` pass it), and
    SIGKILL the worker that runs the node once the provider charged; return the
    invocation."""
    workers = [start_worker(), start_worker()]
    node_input = {"journal": journal, "amount": 25, "seconds": WORK, "idempotent": idempotent}
    invocation = services.start("reliability_gated_charge", node_input)
    if grant is None:
        gate = wait_for(
            lambda: Interrupt.objects.filter(invocation=invocation, status="pending").first(),
            what="the gate's question",
        )
        services.submit_function_responses([{"id": gate.pk, "response": {"decision": "approve"}}])
    wait_for(lambda: charges(journal), what="the provider to charge")
    (charged,) = charges(journal)
    (doomed,) = [w for w in workers if w.process.pid == charged["pid"]]
    doomed.process.kill()
    doomed.process.wait()
    effect = Effect.objects.get(invocation=invocation)
    assert effect.status == "started", "killed before the result was recorded"
    return invocation


def test_an_idempotent_effect_is_called_again_with_the_same_key(
    postgres, start_worker, journal, beat
):
    invocation = approve_and_kill(start_worker, journal, idempotent=True)

    def finished() -> Invocation | None:
        beat.tick()
        row = Invocation.objects.get(pk=invocation.pk)
        return row if NodeStatus(row.status).is_final else None

    row = wait_for(finished, timeout=40, what="the invocation to finish")
    assert row.status == NodeStatus.COMPLETED, row.error
    assert row.output == {"charged": 25}
    first, again = charges(journal)
    assert (
        first["key"] == again["key"] == f"{invocation.pk}:reliability_gated_charge@1/charge@1:card"
    )
    assert first["pid"] != again["pid"]
    effect = Effect.objects.get(invocation=invocation)
    assert (effect.status, effect.attempts) == ("finished", 2)


def test_a_non_idempotent_effect_asks_whether_it_happened_instead_of_repeating(
    postgres, start_worker, journal, beat
):
    invocation = approve_and_kill(start_worker, journal, idempotent=False)

    def in_doubt() -> Interrupt | None:
        beat.tick()
        return Interrupt.objects.filter(
            invocation=invocation, status=InterruptStatus.PENDING, payload__effect="card"
        ).first()

    question = wait_for(in_doubt, timeout=40, what="the question whether it happened")
    assert question.response_schema["required"] == ["happened"]
    assert len(charges(journal)) == 1  # not repeated
    assert Effect.objects.get(invocation=invocation).status == "in_doubt"
    services.submit_function_responses(
        [{"id": question.pk, "response": {"happened": True, "result": {"charged": 25}}}]
    )

    def finished() -> Invocation | None:
        row = Invocation.objects.get(pk=invocation.pk)
        return row if NodeStatus(row.status).is_final else None

    row = wait_for(finished, timeout=20, what="the invocation to finish")
    assert (row.status, row.output) == (NodeStatus.COMPLETED, {"charged": 25})
    assert len(charges(journal)) == 1


def test_a_charge_passed_on_a_revoked_grant_asks_whether_it_happened_not_the_gate(
    postgres, start_worker, journal, beat
):
    """The charge passed on a grant, the provider charged, the worker died, the grant was
    revoked before recovery: the run asks whether the charge happened, never "Charge 25?"
    (whose rejection would record as rejected a charge that moved money)."""
    grant = Grant.objects.create(
        workflow_name="reliability_gated_charge", node_name="charge", scope="always"
    )
    invocation = approve_and_kill(start_worker, journal, idempotent=False, grant=grant)
    Grant.objects.filter(pk=grant.pk).update(revoked_at=timezone.now())

    def asked() -> Interrupt | None:
        beat.tick()
        return Interrupt.objects.filter(
            invocation=invocation, status=InterruptStatus.PENDING
        ).first()

    question = wait_for(asked, timeout=40, what="a question after recovery")
    assert question.payload.get("effect") == "card", question.message
    assert GrantUse.objects.filter(grant=grant).count() == 1
    services.submit_function_responses(
        [{"id": question.pk, "response": {"happened": True, "result": {"charged": 25}}}]
    )

    def finished() -> Invocation | None:
        row = Invocation.objects.get(pk=invocation.pk)
        return row if NodeStatus(row.status).is_final else None

    row = wait_for(finished, timeout=20, what="the invocation to finish")
    assert (row.status, row.output) == (NodeStatus.COMPLETED, {"charged": 25})
    assert len(charges(journal)) == 1
    assert Effect.objects.get(invocation=invocation).status == "finished"
