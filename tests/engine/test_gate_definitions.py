"""Approval gates as declared: what `approval_gate` refuses at once, the question it asks,
and the gates a workflow holds (no store involved)."""

from datetime import timedelta

import pytest

from workflows.engine import DefaultResponse, Workflow, approval_gate, node
from workflows.engine.errors import GraphError
from workflows.engine.gates import gates_of


def test_a_gate_with_a_deadline_rejects_when_told_to():
    @approval_gate(message="Go?", timeout=timedelta(hours=1), on_timeout="reject")
    @node(name="go")
    def go(node_input):
        return node_input

    request = go.gate.question("q", "go", {})
    assert request.timeout == timedelta(hours=1)
    assert isinstance(request.on_timeout, DefaultResponse)
    assert request.on_timeout.response["decision"] == "reject"


def test_a_quorum_gate_collects_approvals():
    @approval_gate(message="Delete?", quorum=2, assignees=["group:admins"])
    @node(name="delete")
    def delete(node_input):
        return node_input

    request = delete.gate.question("q", "delete", {})
    assert request.quorum == 2
    assert "decisions" in request.response_schema["properties"]


@pytest.mark.parametrize(
    "options",
    [
        {"quorum": 2, "allow_edit": True},
        {"remember": ("forever",)},
        {"args_schema": {"type": "nonsense"}},
        {"assignees": ["finance"]},
        {"on_timeout": {"decision": "perhaps"}},
    ],
)
def test_a_gate_that_could_not_ask_is_refused_when_declared(options):
    with pytest.raises(ValueError):
        approval_gate(message="Go?", **options)


def test_only_nodes_that_do_work_can_be_gated():
    inner = Workflow(name="inner", edges=[("START", node(lambda: 1))])
    with pytest.raises(GraphError):
        approval_gate(message="Go?")(inner)


def test_the_gates_of_a_workflow_include_those_its_nodes_declare_they_run():
    @approval_gate(message="Pay?", remember=("always",))
    @node(name="pay")
    def pay(node_input):
        return node_input

    @approval_gate(message="Check?")
    @node(name="check", parallel_worker=True)
    def check(node_input):
        return node_input

    @node(name="agent", rerun_on_resume=True, runs=[pay])
    async def agent(ctx, node_input):
        return await ctx.run_node(pay, node_input)

    inner = Workflow(name="inner", edges=[("START", check)])
    found = gates_of(Workflow(name="wf", edges=[("START", agent, inner)]))
    assert set(found) == {"pay", "check"}
    assert found["pay"].remember == ("always",)
