"""`verify` compares what people see with the entries that recorded it: a Decision's
actor, on-behalf-of, response and comment; a question's status, answer and who answered;
a Grant's scope, pins, expiry, uses and revocation; a Delegation; an Invocation's start
and cancellation. Each row edited in the database is named (exit 1); the untouched trail,
after the ordinary changes (a grant's uses counting down, a revocation, a delegate's
decision, a delegation ended, a cancel), stays green."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.asking import ask
from tests.factories import ApproverFactory
from tests.gates.test_services import PROPOSAL, start_refund, support
from tests.people.conftest import away
from workflows import services
from workflows.audit.rows import RowProblem
from workflows.audit.verify import verify
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Delegation, Grant, Interrupt, Invocation
from workflows.services import grants

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def trail():
    """A trail with every kind of row, each changed the ordinary way."""
    boss = support("boss", "add_grant")
    carol, dave = ApproverFactory(username="carol"), ApproverFactory(username="dave")
    delegation = away(carol, dave)
    asked = ask(message="Ship it?", assignees=["user:carol"])
    decision = services.decide(asked.pk, {"approved": True}, actor=dave, comment="for carol")
    gated = start_refund()
    answer = {"decision": "approve", "remember": "always"}
    services.decide(gated.pk, answer, actor=boss, comment="fine")
    remembered = Grant.objects.get(interrupt_id=gated.pk)
    counted = grants.create_grant(
        "hitl_test_refund",
        "refund",
        "always",
        actor=boss,
        pins={"type": "object", "properties": {"amount": {"maximum": 100}}},
        ttl_seconds=3600,
        uses_left=5,
    )
    grants.revoke_grant(remembered, actor=boss)
    services.start("hitl_test_refund", PROPOSAL)  # passes on `counted`: 5 -> 4
    cancelled = ask(message="Cancel me")
    services.cancel(cancelled.invocation, actor=None)
    services.end_delegation(delegation, actor=carol)
    return {
        "decision": decision,
        "answered": Interrupt.objects.get(pk=asked.pk),
        "cancelled": Interrupt.objects.get(pk=cancelled.pk),
        "remembered": remembered,
        "counted": Grant.objects.get(pk=counted.pk),
        "delegation": Delegation.objects.get(pk=delegation.pk),
        "boss": boss,
    }


def rows_named(report) -> list[str]:
    return [p.row for p in report.problems if isinstance(p, RowProblem)]


def test_the_untouched_trail_verifies(trail):
    assert trail["counted"].uses_left == 4
    assert trail["decision"].on_behalf_of.username == "carol"
    report = verify()
    assert report.ok, [str(p) for p in report.problems]
    out = io.StringIO()
    call_command("hitl_audit", "verify", stdout=out)
    assert out.getvalue().startswith("OK")


def later(days=365):
    return timezone.now() + timedelta(days=days)


EDITS = {
    "decision's actor": lambda t: Decision.objects.filter(pk=t["decision"].pk).update(
        actor=t["boss"]
    ),
    "decision's on_behalf_of": lambda t: Decision.objects.filter(pk=t["decision"].pk).update(
        on_behalf_of=None
    ),
    "decision's response": lambda t: Decision.objects.filter(pk=t["decision"].pk).update(
        response={"approved": False}
    ),
    "decision's comment": lambda t: Decision.objects.filter(pk=t["decision"].pk).update(
        comment="ceo approved"
    ),
    "question's status": lambda t: Interrupt.objects.filter(pk=t["answered"].pk).update(
        status=InterruptStatus.PENDING, response=None, resolved_by=None
    ),
    "question's answer": lambda t: Interrupt.objects.filter(pk=t["answered"].pk).update(
        response={"approved": False}
    ),
    "question's answerer": lambda t: Interrupt.objects.filter(pk=t["answered"].pk).update(
        resolved_by=t["boss"]
    ),
    "cancelled question reopened": lambda t: Interrupt.objects.filter(pk=t["cancelled"].pk).update(
        status=InterruptStatus.PENDING, resolved_by=None
    ),
    "grant's pins widened": lambda t: Grant.objects.filter(pk=t["counted"].pk).update(pins=None),
    "grant's uses": lambda t: Grant.objects.filter(pk=t["counted"].pk).update(uses_left=500),
    "grant's expiry": lambda t: Grant.objects.filter(pk=t["counted"].pk).update(expires_at=later()),
    "grant's scope": lambda t: Grant.objects.filter(pk=t["counted"].pk).update(
        scope="session", scope_id="s-1"
    ),
    "grant un-revoked": lambda t: Grant.objects.filter(pk=t["remembered"].pk).update(
        revoked_at=None, revoked_by=None
    ),
    "grant inserted": lambda t: Grant.objects.create(
        workflow_name="hitl_test_refund", node_name="refund", scope="always"
    ),
    "delegation's end": lambda t: Delegation.objects.filter(pk=t["delegation"].pk).update(
        ends_at=later()
    ),
    "delegation un-ended": lambda t: Delegation.objects.filter(pk=t["delegation"].pk).update(
        ended_at=None
    ),
    "delegation's workflows": lambda t: Delegation.objects.filter(pk=t["delegation"].pk).update(
        workflows=["hitl_test_refund"]
    ),
    "invocation un-cancelled": lambda t: Invocation.objects.filter(
        pk=t["cancelled"].invocation_id
    ).update(status=NodeStatus.COMPLETED),
    "invocation's input": lambda t: Invocation.objects.filter(
        pk=t["answered"].invocation_id
    ).update(input={"request": {"message": "Something else?"}}),
}
NAMED = {
    "decision": lambda t: f"decision {t['decision'].pk} ",
    "question's": lambda t: f"question {t['answered'].pk!r}",
    "cancelled question": lambda t: f"question {t['cancelled'].pk!r}",
    "grant un-revoked": lambda t: f"grant {t['remembered'].pk}",
    "grant inserted": lambda t: "grant ",
    "grant's": lambda t: f"grant {t['counted'].pk}",
    "delegation": lambda t: f"delegation {t['delegation'].pk}",
    "invocation un-cancelled": lambda t: f"invocation {t['cancelled'].invocation_id}",
    "invocation's input": lambda t: f"invocation {t['answered'].invocation_id}",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_each_row_edited_in_the_database_is_named(trail, edit):
    EDITS[edit](trail)
    named = rows_named(verify())
    (prefix,) = [p for p in NAMED if edit.startswith(p)]
    expected = NAMED[prefix](trail)
    assert named and all((row + " ").startswith(expected) for row in named), named
    with pytest.raises(CommandError) as failed:
        call_command("hitl_audit", "verify", stdout=io.StringIO())
    assert failed.value.returncode == 1


def test_every_row_that_disagrees_is_named(trail):
    for edit in ("decision's comment", "grant's uses", "delegation's end", "grant un-revoked"):
        EDITS[edit](trail)
    named = rows_named(verify())
    assert sorted(named) == sorted(
        [
            f"decision {trail['decision'].pk} on question {trail['answered'].pk!r}",
            f"grant {trail['counted'].pk}",
            f"grant {trail['remembered'].pk}",
            f"delegation {trail['delegation'].pk}",
        ]
    )


def test_one_invocation_is_checked_alone(trail):
    EDITS["decision's comment"](trail)
    EDITS["grant's uses"](trail)
    named = rows_named(verify(trail["answered"].invocation_id))
    assert named == [f"decision {trail['decision'].pk} on question {trail['answered'].pk!r}"]
