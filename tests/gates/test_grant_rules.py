"""What a grant may be, checked before anything is stored (DESIGN 4.4): on a quorum gate a
grant only when every approver asked to remember, the narrowest of what they asked; pins
a JSON Schema whose references resolve; ttl and uses within HITL["GRANT_MAX_TTL"] and
["GRANT_MAX_USES"]. Generated grant requests and gate answers are either refused with a
named error and nothing stored, or accepted and usable. And an effect's finish is
committed before `ctx.effect` returns, on the database store."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connections
from django.test import override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from tests.asking import ask
from tests.gates.gated import MAIL, REFUND, TRANSFER
from tests.gates.test_services import snapshot, start_refund, support
from tests.test_fuzz_inputs import FUZZ
from workflows import services
from workflows.engine import Workflow, node
from workflows.engine.effects import in_doubt_schema
from workflows.engine.errors import InvalidGrantError, ResponseValidationError, WorkflowError
from workflows.engine.grants import pins_allow
from workflows.engine.questions import effect_question_id
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Effect, Grant, Interrupt, Invocation, Session
from workflows.registry import registry
from workflows.services import grants

pytestmark = pytest.mark.django_db(transaction=True)


def pending(invocation: Invocation) -> Interrupt:
    return Interrupt.objects.get(invocation=invocation, status=InterruptStatus.PENDING)


def transfer(amount: int, session: Session | None = None) -> Invocation:
    invocation = services.start(TRANSFER, {"amount": amount}, session=session)
    invocation.refresh_from_db()
    return invocation


def test_a_quorum_grant_needs_every_approver_to_ask_for_it():
    """The second approver alone adding "remember" makes no grant: later transfers of the
    session still need two approvers."""
    ada, ben = support("ada"), support("ben")
    first = transfer(5_000_000)
    services.decide(pending(first).pk, {"decision": "approve"}, actor=ada)
    services.decide(pending(first).pk, {"decision": "approve", "remember": "session"}, actor=ben)
    first.refresh_from_db()
    assert first.status == NodeStatus.COMPLETED
    assert not Grant.objects.exists()
    later = transfer(5_000_000, session=first.session)
    assert later.status == NodeStatus.WAITING


def test_a_quorum_grant_is_the_narrowest_of_what_every_approver_asked():
    ada, ben = support("ada"), support("ben")
    first = transfer(50)
    asked_by_ada = {
        "decision": "approve",
        "remember": "session",
        "pins": {"properties": {"amount": {"maximum": 100}}},
        "ttl_seconds": 3600,
        "uses_left": 5,
    }
    asked_by_ben = {
        "decision": "approve",
        "remember": "session",
        "pins": {"properties": {"amount": {"minimum": 10}}},
        "ttl_seconds": 60,
        "uses_left": 9,
    }
    services.decide(pending(first).pk, asked_by_ada, actor=ada)
    services.decide(pending(first).pk, asked_by_ben, actor=ben)
    grant = Grant.objects.get()
    assert (grant.scope, grant.uses_left) == ("session", 5)
    assert grant.expires_at <= timezone.now() + timedelta(seconds=60)
    assert pins_allow(grant.pins, {"amount": 50})
    assert not pins_allow(grant.pins, {"amount": 5})  # ben's pin
    assert not pins_allow(grant.pins, {"amount": 500})  # ada's pin
    assert transfer(60, session=first.session).status == NodeStatus.COMPLETED
    assert transfer(500, session=first.session).status == NodeStatus.WAITING


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"ttl_seconds": 10**12}, "ttl_seconds"),
        ({"uses_left": 10**6}, "uses_left"),
        ({"pins": {"$ref": "#/nowhere"}}, "pins"),
        ({"pins": {"$ref": "https://example.com/schema.json"}}, "pins"),
        ({"pins": {"properties": {"a": {"not": {"not": {"not": {}}}}}} | {"$defs": {}}}, None),
    ],
)
def test_a_decision_asking_for_a_grant_that_cannot_be_kept_is_refused(asked, field):
    ada = support("ada")
    interrupt = start_refund()
    answer = {"decision": "approve", "remember": "session", **asked}
    if field is None:  # a pin that can be kept: accepted
        services.decide(interrupt.pk, answer, actor=ada)
        assert Grant.objects.count() == 1
        return
    before = snapshot()
    with pytest.raises(ResponseValidationError) as refused:
        services.decide(interrupt.pk, answer, actor=ada)
    assert refused.value.field == field
    with pytest.raises(ResponseValidationError):  # the system's answers too
        services.submit_function_responses([{"id": interrupt.pk, "response": answer}])
    assert snapshot() == before


def test_the_grant_limits_are_settings():
    ada = support("ada")
    interrupt = start_refund()
    with override_settings(HITL={"GRANT_MAX_USES": 3, "GRANT_MAX_TTL": 600}):
        for asked in ({"uses_left": 4}, {"ttl_seconds": 601}):
            with pytest.raises(ResponseValidationError):
                services.decide(
                    interrupt.pk, {"decision": "approve", "remember": "session", **asked}, actor=ada
                )
        with pytest.raises(InvalidGrantError, match="from 1 to 3"):
            grants.create_grant(
                REFUND, "refund", "always", actor=support("boss", "add_grant"), uses_left=4
            )
        answer = {"decision": "approve", "remember": "session", "uses_left": 3, "ttl_seconds": 600}
        services.decide(interrupt.pk, answer, actor=ada)
    assert Grant.objects.get().uses_left == 3


def test_an_edit_through_the_services_checks_the_schemas_formats():
    ada = support("ada")
    invocation = services.start(MAIL, {"to": "ann@example.com"})
    interrupt = pending(invocation)
    before = snapshot()
    edit = {"decision": "edit", "args": {"to": "not an email"}}
    with pytest.raises(ResponseValidationError) as refused:
        services.decide(interrupt.pk, edit, actor=ada)
    assert refused.value.field == "args.to"
    with pytest.raises(ResponseValidationError):
        services.submit_function_responses([{"id": interrupt.pk, "response": edit}], actor=ada)
    assert snapshot() == before


# --- Generated grant requests and gate answers ------------------------------------------------
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
PINS = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "number", "string", "nope"]),
            "maximum": st.integers() | st.text(max_size=3),
            "$ref": st.sampled_from(["#", "#/nowhere", "#/$defs/a", "http://x/y", "#/properties"]),
            "format": st.sampled_from(["email", "uuid", "made-up"]),
        },
    ),
    lambda inner: st.dictionaries(
        st.sampled_from(["properties", "$defs", "allOf", "not", "amount", "a"]),
        inner | st.lists(inner, max_size=2),
        max_size=2,
    ),
    max_leaves=6,
)
COUNTS = st.none() | st.integers(min_value=-5, max_value=10**20) | st.sampled_from([True, 1.5, "3"])


@FUZZ
@given(pins=st.none() | PINS | JSON_SCALARS, ttl=COUNTS, uses=COUNTS)
def test_a_grant_request_is_refused_cleanly_or_kept_and_usable(pins, ttl, uses):
    boss = support(f"boss{Grant.objects.count()}{Invocation.objects.count()}", "add_grant")
    before = snapshot()
    try:
        grant = grants.create_grant(
            REFUND, "refund", "always", actor=boss, pins=pins, ttl_seconds=ttl, uses_left=uses
        )
    except InvalidGrantError:
        assert snapshot() == before
        return
    used = services.start(REFUND, {"amount": 40, "customer": "ann"})
    used.refresh_from_db()
    assert used.status in (NodeStatus.COMPLETED, NodeStatus.WAITING), used.error
    grants.revoke_grant(grant, actor=boss)


ANSWERS = st.fixed_dictionaries(
    {"decision": st.sampled_from(["approve", "reject", "edit", "maybe"])},
    optional={
        "args": st.fixed_dictionaries(
            {
                "amount": st.integers(-5, 10**6) | st.text(max_size=4),
                "customer": st.text(max_size=4),
            }
        ),
        "remember": st.sampled_from(["invocation", "session", "always", "forever"]),
        "pins": PINS | JSON_SCALARS,
        "ttl_seconds": COUNTS,
        "uses_left": COUNTS,
        "reason": st.text(max_size=8),
    },
)


@FUZZ
@given(answer=ANSWERS)
def test_a_gate_answer_is_refused_cleanly_or_lets_the_node_go_on(answer):
    ada = support(f"ada{Invocation.objects.count()}", "add_grant")
    interrupt = start_refund()
    before = snapshot()
    try:
        services.decide(interrupt.pk, answer, actor=ada)
    except (WorkflowError, PermissionDenied):
        assert snapshot() == before
        return
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    # Refunded, or rejected and proposed again (the workflow's revising step asks anew).
    assert invocation.status in (NodeStatus.COMPLETED, NodeStatus.WAITING), invocation.error
    for grant in Grant.objects.filter(interrupt_id=interrupt.pk):
        pins_allow(grant.pins, {"amount": 1, "customer": "ann"})  # usable: never raises


# --- The effect's finish is committed before ctx.effect returns -------------------------------
SEEN: dict[str, Any] = {}


def _read_elsewhere(invocation_id: str) -> None:
    """The effect's row as another connection (another process) sees it."""
    try:
        row = Effect.objects.filter(invocation_id=invocation_id).first()
        SEEN["status"] = row.status if row else None
    finally:
        connections.close_all()


@node(name="pay")
def pay_and_look(node_input: Any, ctx: Any) -> Any:
    result = ctx.effect_sync("bank", lambda amount: {"paid": amount}, node_input)
    reader = threading.Thread(target=_read_elsewhere, args=(ctx.invocation_id,))
    reader.start()
    reader.join()
    return result


COMMITTED = "hitl_test_effect_committed"
if COMMITTED not in {d.name for d in registry.definitions()}:
    registry.register(Workflow(name=COMMITTED, edges=[("START", pay_and_look)]))


def test_an_effects_finish_is_committed_before_ctx_effect_returns():
    SEEN.clear()
    invocation = services.start(COMMITTED, 12)
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, {"paid": 12})
    assert SEEN == {"status": "finished"}


def test_a_quorums_answers_to_an_in_doubt_question_must_agree():
    """Two approvers must say the same: one voice alone never decides that a payment did
    not happen (which would make it again)."""
    ann, ben = support("ann"), support("ben")
    interrupt = ask(
        interrupt_id=effect_question_id("an-invocation:refund@1", "pay", 1),
        response_schema=in_doubt_schema(quorum=2),
        assignees=["group:support"],
        quorum=2,
    )
    services.decide(interrupt.pk, {"happened": True, "result": "r-1", "approved": True}, actor=ann)
    before = snapshot()
    with pytest.raises(ResponseValidationError) as refused:
        services.decide(interrupt.pk, {"happened": False, "approved": True}, actor=ben)
    assert refused.value.field == "happened"
    assert snapshot() == before
    services.decide(interrupt.pk, {"happened": True, "result": "r-1", "approved": True}, actor=ben)
    interrupt.refresh_from_db()
    assert interrupt.status == InterruptStatus.RESOLVED
