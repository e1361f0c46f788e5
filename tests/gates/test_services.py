"""Approval gates through the services: a gate's question is a normal interrupt (the
answer rule, quorum, four-eyes, deadlines); remembering `always` needs workflows.add_grant;
grants made, used, listed and revoked by the rule."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core import serializers
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from tests.factories import ApproverFactory, UserFactory, grant_answer
from tests.gates.gated import DELETE, REFUND, TIMED
from workflows import services
from workflows.engine.errors import InvalidGrantError, UnknownGrantError
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Decision, Effect, Grant, GrantUse, Interrupt, Invocation
from workflows.services import grants

pytestmark = pytest.mark.django_db(transaction=True)

PROPOSAL = {"amount": 40, "customer": "ann"}


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *Interrupt.objects.all(), *Decision.objects.all()]
    rows += [*Grant.objects.all(), *GrantUse.objects.all(), *Effect.objects.all()]
    return serializers.serialize("json", rows)


def support(username: str, *permissions: str):
    user = ApproverFactory(username=username)
    user.groups.add(Group.objects.get_or_create(name="support")[0])
    return grant_answer(user, "answer_interrupt", *permissions)


def question(invocation: Invocation) -> Interrupt:
    return Interrupt.objects.get(invocation=invocation, status=InterruptStatus.PENDING)


def start_refund(user=None, proposal=PROPOSAL, session=None) -> Interrupt:
    invocation = services.start(REFUND, proposal, user=user, session=session)
    return question(invocation)


def test_a_gates_question_is_an_interrupt_for_its_assignees():
    interrupt = start_refund()
    assert interrupt.message == "Refund 40 to ann?"
    assert interrupt.payload == {"node": "refund", "args": PROPOSAL}
    assert interrupt.assignees == ["group:support"]
    outsider = ApproverFactory(username="outsider")
    before = snapshot()
    with pytest.raises(PermissionDenied):
        services.decide(interrupt.pk, {"decision": "approve"}, actor=outsider)
    assert snapshot() == before


def test_an_edit_decided_by_support_runs_the_node_with_the_edit():
    ada = support("ada")
    interrupt = start_refund()
    edit = {"amount": 25, "customer": "ann"}
    services.decide(interrupt.pk, {"decision": "edit", "args": edit}, actor=ada)
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"refunded": 25, "to": "ann"}


def test_remembering_always_needs_the_add_grant_permission():
    ada = support("ada")
    interrupt = start_refund()
    before = snapshot()
    with pytest.raises(PermissionDenied, match=r"workflows\.add_grant"):
        services.decide(interrupt.pk, {"decision": "approve", "remember": "always"}, actor=ada)
    assert snapshot() == before, "a refused decision stores nothing, no grant"
    with pytest.raises(PermissionDenied, match=r"workflows\.add_grant"):
        services.submit_function_responses(
            [{"id": interrupt.pk, "response": {"decision": "approve", "remember": "always"}}],
            actor=ada,
        )
    assert snapshot() == before


def test_an_always_grant_made_in_a_decision_lets_later_refunds_pass_and_records_them():
    boss = support("boss", "add_grant")
    first = start_refund()
    pins = {"properties": {"amount": {"maximum": 50}}}
    answer = {"decision": "approve", "remember": "always", "pins": pins, "uses_left": 5}
    services.decide(first.pk, answer, actor=boss)
    grant = Grant.objects.get()
    assert (grant.granted_by, grant.scope, grant.pins, grant.uses_left) == (
        boss,
        "always",
        pins,
        5,
    )
    assert grant.interrupt_id == first.pk
    later = services.start(REFUND, {"amount": 30, "customer": "bob"})
    later.refresh_from_db()
    assert later.status == NodeStatus.COMPLETED
    (use,) = GrantUse.objects.all()
    assert (use.grant, use.invocation, use.path) == (grant, later, f"{REFUND}@1/refund@1")
    grant.refresh_from_db()
    assert grant.uses_left == 4
    outside_pins = services.start(REFUND, {"amount": 300, "customer": "bob"})
    assert question(outside_pins).payload["args"]["amount"] == 300


def test_a_session_grant_covers_the_invocations_of_its_session():
    ada = support("ada")
    first = start_refund()
    session = first.invocation.session
    services.decide(first.pk, {"decision": "approve", "remember": "session"}, actor=ada)
    same = services.start(REFUND, PROPOSAL, session=session)
    same.refresh_from_db()
    assert same.status == NodeStatus.COMPLETED
    elsewhere = services.start(REFUND, PROPOSAL)
    assert question(elsewhere)


def test_a_quorum_gate_needs_two_approvers_and_never_the_starter():
    starter = ApproverFactory(username="starter")
    ann, ben = ApproverFactory(username="ann"), ApproverFactory(username="ben")
    invocation = services.start(DELETE, {"record": 7}, user=starter)
    interrupt = question(invocation)
    with pytest.raises(PermissionDenied, match="four eyes"):
        services.decide(interrupt.pk, {"decision": "approve"}, actor=starter)
    services.decide(interrupt.pk, {"decision": "approve"}, actor=ann)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.WAITING
    services.decide(interrupt.pk, {"decision": "approve", "reason": "checked"}, actor=ben)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"deleted": 7}


def test_the_first_rejection_of_a_quorum_gate_rejects_at_once():
    ann = ApproverFactory(username="ann")
    invocation = services.start(DELETE, {"record": 7})
    interrupt = question(invocation)
    services.decide(interrupt.pk, {"decision": "reject", "reason": "still in use"}, actor=ann)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"rejected": True, "reason": "still in use"}


def test_a_gate_past_its_deadline_rejects():
    invocation = services.start(TIMED, 1)
    interrupt = question(invocation)
    services.expire_overdue_interrupts(now=timezone.now() + timedelta(seconds=5))
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"rejected": True, "reason": "no decision before the deadline"}
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.EXPIRED


def test_revoking_is_for_the_granter_and_holders_of_change_grant():
    ada, ben = support("ada"), support("ben")
    keeper = grant_answer(UserFactory(username="keeper", is_staff=True), "change_grant")
    interrupt = start_refund()
    services.decide(interrupt.pk, {"decision": "approve", "remember": "invocation"}, actor=ada)
    grant = Grant.objects.get()
    before = snapshot()
    with pytest.raises(PermissionDenied, match="did not grant"):
        grants.revoke_grant(grant, actor=ben)
    assert snapshot() == before
    revoked = grants.revoke_grant(grant.pk, actor=ada)
    assert (revoked.revoked_by, revoked.revoked_at is not None) == (ada, True)
    other = Grant.objects.create(workflow_name=REFUND, node_name="refund", scope="always")
    assert grants.revoke_grant(other, actor=keeper).revoked_by == keeper
    with pytest.raises(UnknownGrantError):
        grants.revoke_grant("no-such-grant", actor=keeper)


def test_a_grant_made_apart_from_decisions_needs_add_grant_and_a_real_gate():
    ada = support("ada")
    boss = support("boss", "add_grant")
    with pytest.raises(PermissionDenied):
        grants.create_grant(REFUND, "refund", "always", actor=ada)
    cases = [
        ((REFUND, "revise", "always"), {}, "node"),
        ((DELETE, "delete_record", "always"), {}, "scope"),
        ((REFUND, "refund", "session"), {}, "scope_id"),
        ((REFUND, "refund", "always"), {"pins": {"type": "nope"}}, "pins"),
        ((REFUND, "refund", "always"), {"uses_left": 0}, "uses_left"),
    ]
    for args, options, field in cases:
        with pytest.raises(InvalidGrantError) as refused:
            grants.create_grant(*args, actor=boss, **options)
        assert refused.value.field == field
    assert not Grant.objects.exists()
    grant = grants.create_grant(REFUND, "refund", "always", actor=boss, ttl_seconds=60)
    assert grant.granted_by == boss and grant.expires_at > timezone.now()
    passed = services.start(REFUND, PROPOSAL)
    passed.refresh_from_db()
    assert passed.status == NodeStatus.COMPLETED


def test_each_grant_action_is_announced_once_it_is_committed():
    from workflows import signals

    seen = []

    def receiver(sender, **kwargs):
        seen.append((kwargs["action"], kwargs["grant_id"], kwargs["path"], kwargs["actor_id"]))

    signals.grant_changed.connect(receiver, weak=False, dispatch_uid="test-grants")
    try:
        ada = support("ada")
        interrupt = start_refund()
        session = interrupt.invocation.session
        services.decide(interrupt.pk, {"decision": "approve", "remember": "session"}, actor=ada)
        grant = Grant.objects.get()
        services.start(REFUND, PROPOSAL, session=session)
        grants.revoke_grant(grant, actor=ada)
        grants.revoke_grant(grant, actor=ada)  # changes nothing: no second announcement
    finally:
        signals.grant_changed.disconnect(dispatch_uid="test-grants")
    assert seen == [
        ("grant.created", grant.pk, "", ada.pk),
        ("grant.used", grant.pk, f"{REFUND}@1/refund@1", None),
        ("grant.revoked", grant.pk, "", ada.pk),
    ]


def test_two_dispatches_racing_for_a_grants_last_use_one_passes():
    """PostgreSQL, two connections at once: the grant's last use goes to one of them; the
    other's write is refused (its gate then asks), and nothing of it is stored."""
    from datetime import UTC, datetime

    from tests.integration.test_concurrency import run_at_once
    from tests.integration.worker import require_postgres
    from workflows.engine.errors import GrantUnavailableError
    from workflows.engine.state import GrantUse as Use
    from workflows.engine.state import WriteBatch
    from workflows.store import DjangoStore

    require_postgres("two connections writing at once")
    invocations = [services.start(REFUND, PROPOSAL) for _ in range(2)]
    grant = Grant.objects.create(
        workflow_name=REFUND, node_name="refund", scope="always", uses_left=1
    )

    def use(invocation):
        use = Use(grant.pk, str(invocation.pk), f"{REFUND}@1/refund@1", datetime.now(UTC))
        return DjangoStore().commit_sync(WriteBatch(str(invocation.pk), grant_uses=[use]))

    results, errors = run_at_once([lambda i=i: use(i) for i in invocations])
    assert len(results) == 1 and [type(e) for e in errors] == [GrantUnavailableError]
    grant.refresh_from_db()
    assert grant.uses_left == 0
    assert GrantUse.objects.count() == 1


def test_grant_actions_and_edits_are_in_the_audit_trail_which_verifies():
    from io import StringIO

    from django.core.management import call_command

    from workflows.models import AuditEntry

    boss = support("boss", "add_grant")
    first = start_refund()
    edit = {"decision": "edit", "args": {"amount": 30, "customer": "ann"}, "remember": "always"}
    services.decide(first.pk, edit, actor=boss)
    grant = Grant.objects.get()
    later = services.start(REFUND, PROPOSAL)
    grants.revoke_grant(grant, actor=boss)

    entries = {e.action: e for e in AuditEntry.objects.filter(action__startswith="grant.")}
    created, used, revoked = (entries[f"grant.{a}"] for a in ("created", "used", "revoked"))
    assert (created.invocation_id, created.interrupt_id, created.actor) == (
        first.invocation_id,
        first.pk,
        boss,
    )
    assert created.data["grant"] == grant.pk and created.data["scope"] == "always"
    assert (used.invocation_id, used.actor, used.data["path"]) == (
        later.pk,
        None,
        f"{REFUND}@1/refund@1",
    )
    assert (revoked.invocation_id, revoked.actor) == (None, boss)
    decided = AuditEntry.objects.get(action="decision.recorded", interrupt_id=first.pk)
    assert decided.data["edit"] == {
        "proposed": PROPOSAL,
        "edited": {"amount": 30, "customer": "ann"},
        "changed": ["amount"],
    }
    out = StringIO()
    call_command("hitl_audit", "verify", stdout=out)  # raises SystemExit(1) when broken


def test_a_decision_asks_each_rule_once(monkeypatch):
    # `decide` passes the one answer check: the answer rule and a gate's grant rule are
    # each asked once (the grant rule was once asked twice in a row).
    from workflows.services import answer_check

    asked: dict[str, int] = {}

    def counted(name: str):
        real = getattr(answer_check, name)

        def ask(*args, **kwargs):
            asked[name] = asked.get(name, 0) + 1
            return real(*args, **kwargs)

        return ask

    for name in ("answer_policy", "require_granter"):
        monkeypatch.setattr(answer_check, name, counted(name))
    boss = support("boss", "add_grant")
    pins = {"properties": {"amount": {"maximum": 50}}}
    answer = {"decision": "approve", "remember": "always", "pins": pins}
    services.decide(start_refund().pk, answer, actor=boss)
    assert asked == {"answer_policy": 1, "require_granter": 1}
    assert Grant.objects.get().granted_by == boss
