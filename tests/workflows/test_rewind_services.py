"""services.rewind, plan_rewind and reopen (DESIGN 3.8): who may change an answer, what
is stored and told, quorum questions through a new round, refusals that change nothing."""

import pytest
from django.core import serializers
from django.core.exceptions import PermissionDenied

from tests.asking import APPROVAL, ask
from tests.factories import ApproverFactory, UserFactory, grant_answer
from workflows import services, signals
from workflows.audit.verify import verify
from workflows.engine.errors import (
    DecisionRequiredError,
    InterruptSupersededError,
    NotRewindableError,
    ResponseValidationError,
    UnknownInterruptError,
)
from workflows.engine.events import FunctionResponse
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Decision, Interrupt, Invocation, NodeRun, SessionEvent

pytestmark = pytest.mark.django_db(transaction=True)


def snapshot() -> str:
    rows = [*Invocation.objects.all(), *Interrupt.objects.all(), *Decision.objects.all()]
    rows += [*SessionEvent.objects.all(), *NodeRun.objects.all(), *AuditEntry.objects.all()]
    return serializers.serialize("json", rows)


def rewinder(**kwargs):
    user = ApproverFactory(**kwargs)
    return grant_answer(user, "answer_interrupt", "rewind_interrupt")


@pytest.fixture
def heard():
    heard = {"rewound": [], "finished": []}

    def rewound(sender, **kwargs):
        heard["rewound"].append(kwargs)

    def finished(sender, **kwargs):
        heard["finished"].append(kwargs)

    signals.invocation_rewound.connect(rewound, weak=False, dispatch_uid="test-rewound")
    signals.invocation_finished.connect(finished, weak=False, dispatch_uid="test-finished")
    yield heard
    signals.invocation_rewound.disconnect(dispatch_uid="test-rewound")
    signals.invocation_finished.disconnect(dispatch_uid="test-finished")


def answered(approved: bool = True, **request):
    approver = rewinder()
    interrupt = ask(**request)
    services.submit_function_responses(
        [FunctionResponse(interrupt.pk, "q", {"approved": approved})], actor=approver
    )
    return interrupt, approver


def test_a_person_changes_an_answer_and_the_run_finishes_again(heard):
    interrupt, approver = answered(False)
    assert Invocation.objects.get(pk=interrupt.invocation_id).output == {"approved": False}
    plan = services.plan_rewind(interrupt.pk, actor=approver)
    assert plan.superseded == [f"{interrupt.workflow_name}@1/answered@1"]

    invocation = services.rewind(
        interrupt.pk, {"approved": True}, actor=approver, comment="wrong button"
    )
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"approved": True}
    assert invocation.rewound
    runs = dict(NodeRun.objects.filter(invocation=invocation).values_list("path", "status"))
    assert runs[f"{interrupt.workflow_name}@1/answered@1"] == NodeStatus.SUPERSEDED
    assert runs[f"{interrupt.workflow_name}@1/answered@2"] == NodeStatus.COMPLETED
    entry = AuditEntry.objects.get(action="answer.rewound")
    assert entry.data["old_response"] == {"approved": False}
    assert entry.data["response"] == {"approved": True}
    assert entry.data["comment"] == "wrong button"
    assert entry.actor_id == approver.pk
    assert verify(invocation.pk).ok
    assert heard["rewound"] == [
        {
            "signal": signals.invocation_rewound,
            "invocation_id": str(invocation.pk),
            "interrupt_id": interrupt.pk,
        }
    ]
    assert [f["rewound"] for f in heard["finished"]] == [False, True]


def test_who_may_change_an_answer(heard):
    ann = grant_answer(UserFactory(username="ann", is_staff=True), "answer_interrupt")
    bob = rewinder(username="bob")
    interrupt = ask(assignees=["user:ann", "user:bob"])
    services.submit_function_responses(
        [FunctionResponse(interrupt.pk, "q", {"approved": True})], actor=ann
    )
    carol = rewinder(username="carol")  # may rewind, but is not an assignee
    before = snapshot()
    for person in (ann, carol):
        with pytest.raises(PermissionDenied):
            services.rewind(interrupt.pk, {"approved": False}, actor=person)
        with pytest.raises(PermissionDenied):
            services.plan_rewind(interrupt.pk, actor=person)
        assert not person.has_perm("workflows.rewind_interrupt", interrupt)
    assert snapshot() == before
    assert bob.has_perm("workflows.rewind_interrupt", interrupt)
    services.rewind(interrupt.pk, {"approved": False}, actor=bob)
    assert Invocation.objects.get(pk=interrupt.invocation_id).output == {"approved": False}


def test_four_eyes_binds_a_rewind_too():
    starter = rewinder()
    other = rewinder()
    interrupt = ask(user=starter, four_eyes=True)
    services.submit_function_responses(
        [FunctionResponse(interrupt.pk, "q", {"approved": True})], actor=other
    )
    with pytest.raises(PermissionDenied):
        services.rewind(interrupt.pk, {"approved": False}, actor=starter)


def test_refusals_store_nothing():
    interrupt, approver = answered()
    before = snapshot()
    with pytest.raises(UnknownInterruptError):
        services.rewind("nope", {"approved": False}, actor=approver)
    with pytest.raises(ResponseValidationError):
        services.rewind(interrupt.pk, {"approved": "no"}, actor=approver)
    assert snapshot() == before
    pending = ask()
    with pytest.raises(NotRewindableError) as refused:
        services.rewind(pending.pk, {"approved": False}, actor=approver)
    assert refused.value.reason == "pending"
    services.cancel(pending.invocation_id)
    with pytest.raises(NotRewindableError) as cancelled:
        services.rewind(pending.pk, {"approved": False}, actor=approver)
    assert cancelled.value.reason in ("cancelled", "not_answered")


def test_a_superseded_question_takes_no_answer_nor_decision():
    from tests.asking import WORKFLOW  # noqa: F401  (the asking workflow is registered)

    interrupt, approver = answered()
    # Rewind twice: the first rewind's downstream run is superseded by the second; the
    # question itself stays (its owner is the anchor). A superseded one: by its rounds.
    services.rewind(interrupt.pk, {"approved": False}, actor=approver)
    Interrupt.objects.filter(pk=interrupt.pk).update(status=InterruptStatus.SUPERSEDED)
    with pytest.raises(InterruptSupersededError) as direct:
        services.submit_function_responses(
            [FunctionResponse(interrupt.pk, "q", {"approved": False})], actor=approver
        )
    assert direct.value.code == "interrupt_superseded"
    with pytest.raises(InterruptSupersededError):
        services.decide(interrupt.pk, {"approved": False}, actor=approver)
    with pytest.raises(NotRewindableError) as refused:
        services.rewind(interrupt.pk, {"approved": True}, actor=approver)
    assert refused.value.reason == "superseded"


def test_a_quorum_question_is_changed_by_a_new_round_of_decisions(heard):
    voters = [rewinder(username=f"voter{i}") for i in range(3)]
    interrupt = ask(
        assignees=[f"user:{v.username}" for v in voters], quorum=2, response_schema=APPROVAL
    )
    for voter in voters[:2]:
        services.decide(interrupt.pk, {"approved": True}, actor=voter)
    invocation = Invocation.objects.get(pk=interrupt.invocation_id)
    assert invocation.status == NodeStatus.COMPLETED
    with pytest.raises(DecisionRequiredError):
        services.rewind(interrupt.pk, {"approved": False}, actor=voters[0])

    reopened = services.reopen(interrupt.pk, actor=voters[2], comment="again")
    assert reopened.status == InterruptStatus.PENDING and reopened.round == 2
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.COMPLETED
    # The first round's votes are history: the same person votes again in this round.
    services.decide(interrupt.pk, {"approved": False}, actor=voters[0])
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output["approved"] is False
    assert Decision.objects.filter(interrupt=interrupt).count() == 3
    assert Decision.objects.filter(interrupt=interrupt, round=2).count() == 1
    assert AuditEntry.objects.filter(action="interrupt.reopened").count() == 1
    assert AuditEntry.objects.get(action="answer.rewound").data["old_response"]["approved"]
