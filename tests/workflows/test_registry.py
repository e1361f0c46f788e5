"""Registry: versions pinned per invocation; an incompatible change fails loudly."""

import pytest

from workflows import services
from workflows.engine import RequestInput, Workflow, node
from workflows.engine.status import NodeStatus
from workflows.models import Interrupt, Invocation
from workflows.registry import UnknownWorkflowError, WorkflowRegistry, fingerprint, registry


@node
def ask(node_input):
    return RequestInput(message="ok?")


@node
def finish(node_input):
    return {"done": node_input}


@node
def audit(node_input):
    return {"audited": node_input}


def build(*tail):
    return Workflow(name="versioned", edges=[("START", ask, *tail)])


@pytest.fixture
def versioned():
    yield registry
    registry.unregister("versioned")


def test_register_accepts_a_workflow_or_a_factory():
    local = WorkflowRegistry()
    local.register(build(finish), version="1")

    @local.register(version="2")
    def factory():
        return build(audit)

    assert callable(factory)
    assert local.get("versioned").version == "2"
    assert local.get("versioned", "1").workflow.nodes.keys() == {"ask", "finish"}
    with pytest.raises(UnknownWorkflowError, match="'versioned' version '3'"):
        local.get("versioned", "3")


def test_default_version_is_a_graph_fingerprint():
    assert fingerprint(build(finish)) == fingerprint(build(finish))
    assert fingerprint(build(finish)) != fingerprint(build(audit))


@pytest.mark.django_db(transaction=True)
def test_waiting_invocation_keeps_its_version(versioned):
    versioned.register(build(finish), version="1")
    invocation = services.start("versioned", 1)
    versioned.register(build(audit), version="2")
    question = Interrupt.objects.get(invocation=invocation)
    services.submit_function_responses([{"id": question.id, "response": "yes"}])
    invocation.refresh_from_db()
    assert invocation.workflow_version == "1"
    assert invocation.output == {"done": "yes"}


@pytest.mark.django_db(transaction=True)
def test_compatible_new_version_takes_over_a_vanished_one(versioned):
    versioned.register(build(finish), version="1")
    invocation = services.start("versioned", 1)
    versioned.unregister("versioned")
    versioned.register(build(audit), version="2")
    question = Interrupt.objects.get(invocation=invocation)
    services.submit_function_responses([{"id": question.id, "response": "yes"}])
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.COMPLETED
    assert invocation.output == {"audited": "yes"}


@pytest.mark.django_db(transaction=True)
def test_incompatible_definition_fails_with_a_named_error(versioned):
    versioned.register(build(finish), version="1")
    invocation = services.start("versioned", 1)
    versioned.unregister("versioned")
    versioned.register(Workflow(name="versioned", edges=[("START", finish)]), version="2")
    question = Interrupt.objects.get(invocation=invocation)
    services.submit_function_responses([{"id": question.id, "response": "yes"}])
    invocation = Invocation.objects.get(pk=invocation.pk)
    assert invocation.status == NodeStatus.FAILED
    assert invocation.error.startswith("DefinitionChangedError")
    assert "'versioned'" in invocation.error


def test_unknown_name_lists_the_registered_names_and_the_closest():
    local = WorkflowRegistry()
    local.register(build(finish), version="1")
    local.register(Workflow(name="expense_approval", edges=[("START", finish)]))
    with pytest.raises(UnknownWorkflowError) as raised:
        local.get("expense_aproval")
    message = str(raised.value)
    assert "no workflow named 'expense_aproval' is registered" in message
    assert "did you mean 'expense_approval'?" in message
    assert "Registered: expense_approval, versioned." in message
    assert raised.value.registered == ["expense_approval", "versioned"]


def test_unknown_name_with_nothing_registered_says_how_to_register():
    with pytest.raises(
        UnknownWorkflowError, match=r"No workflow is registered at all.*workflows\.py"
    ):
        WorkflowRegistry().get("anything")


def test_a_name_registered_from_two_modules_is_a_clash():
    local = WorkflowRegistry()
    local.register(build(finish), version="1")
    local.register(build(audit), version="2")  # versions from one module: no clash
    assert local.clashes() == {}
    exec(
        "registry.register(workflow)",
        {"__name__": "other_app.workflows", "registry": local, "workflow": build(finish)},
    )
    assert local.clashes() == {"versioned": ["other_app.workflows", __name__]}
    local.unregister("versioned")
    assert local.clashes() == {}
