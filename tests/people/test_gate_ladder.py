"""An approval gate's question carries a priority, a due date and an escalation ladder
(DESIGN 4.3 with 4.4): given to `approval_gate`, passed to its RequestInput, checked
where the gate is declared."""

from __future__ import annotations

from datetime import timedelta

import pytest

from workflows import services
from workflows.engine import Escalation, Workflow, approval_gate, node
from workflows.models import Interrupt

from .conftest import DIRECTORS, LADDER, MANAGERS

pytestmark = pytest.mark.django_db(transaction=True)

GATED = "hitl_test_gated_ladder"


@pytest.fixture
def gated_workflow(register_workflow):
    @approval_gate(
        message="Pay {amount}?",
        assignees=[MANAGERS],
        priority="urgent",
        due=3600,
        escalation=LADDER,
    )
    @node(name="pay")
    def pay(node_input: dict) -> dict:
        return {"paid": node_input["amount"]}

    return register_workflow(Workflow(name=GATED, edges=[("START", pay)]))


def test_a_gates_question_has_the_priority_due_date_and_ladder_given(gated_workflow, director):
    invocation = services.start(GATED, {"amount": 5})
    question = Interrupt.objects.get(invocation=invocation)
    assert question.priority == "urgent"
    assert question.due_seconds == 3600
    assert abs(question.due_at - question.created_at - timedelta(hours=1)) < timedelta(seconds=1)
    assert question.escalation == [step.to_dict() for step in LADDER]
    assert services.escalate_interrupts(now=question.next_escalation_at + timedelta(days=1)) == 2
    assert Interrupt.objects.get(pk=question.pk).assignees == [DIRECTORS]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": "asap"}, "priority must be one of"),
        ({"due": -5}, "due must be a positive timedelta"),
        ({"escalation": Escalation(after=timedelta(hours=1), remind=True)}, "must be a list"),
        (
            {
                "escalation": [
                    Escalation(after=timedelta(hours=2), remind=True),
                    Escalation(after=timedelta(hours=1), remind=True),
                ]
            },
            "in order of `after`",
        ),
    ],
)
def test_a_gate_with_a_bad_priority_due_date_or_ladder_is_refused_where_declared(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        approval_gate(message="Pay?", **options)
