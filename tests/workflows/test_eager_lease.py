"""In eager mode (the embedded default) the transaction that gives an invocation work, a
start or an accepted answer, also takes its lease, so the run that executes right after
the commit has no lease transaction of its own (workflows/services/runs.py, enqueue_run_here),
and only where that is as safe as a worker taking it."""

import pytest
from django.db import connection, transaction
from django.test import override_settings

from workflows import dispatch, services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.status import NodeStatus
from workflows.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asking(register_workflow):
    @node
    def ask(node_input):
        return RequestInput(interrupt_id=f"eager-{node_input}", payload=node_input)

    @node
    def after(node_input):
        return node_input["ok"]

    return register_workflow(Workflow(name="eager_lease", edges=[("START", ask, after)]))


def test_an_answer_and_the_lease_of_its_run_commit_together(asking):
    invocation = services.start("eager_lease", 1)
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING
    commits = []
    connection_commit = connection.commit

    def counted() -> None:
        commits.append(Invocation.objects.get(pk=invocation.pk).lease_owner)
        connection_commit()

    connection.commit = counted
    try:
        services.submit_function_responses([FunctionResponse("eager-1", "ask", {"ok": 5})])
    finally:
        del connection.commit
    # The accept transaction commits with the run's lease held: the run takes no lease.
    assert commits[0] != ""
    row = Invocation.objects.get(pk=invocation.pk)
    assert (row.status, row.output, row.lease_owner) == (NodeStatus.COMPLETED, 5, "")


def test_inside_a_callers_transaction_the_run_takes_its_lease_itself(asking):
    # The caller's transaction may last longer than a lease: nothing is leased in it.
    with transaction.atomic():
        invocation = services.start("eager_lease", 2)
        assert Invocation.objects.get(pk=invocation.pk).lease_owner == ""
    row = Invocation.objects.get(pk=invocation.pk)
    assert (row.status, row.lease_owner) == (NodeStatus.WAITING, "")
    with transaction.atomic():
        services.submit_function_responses([FunctionResponse("eager-2", "ask", {"ok": 6})])
        assert Invocation.objects.get(pk=invocation.pk).lease_owner == ""
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.COMPLETED


@override_settings(HITL={"MAX_DELIVERIES": 3})
def test_an_answer_to_an_invocation_whose_runs_never_finished_counts_the_delivery(asking):
    """The poison guard holds on the eager path: the answer's run is a delivery like any
    other, and at HITL["MAX_DELIVERIES"] the invocation fails instead of running again."""
    invocation = services.start("eager_lease", 3)
    Invocation.objects.filter(pk=invocation.pk).update(unfinished_deliveries=3)
    services.submit_function_responses([FunctionResponse("eager-3", "ask", {"ok": 7})])
    row = Invocation.objects.get(pk=invocation.pk)
    assert row.status == NodeStatus.FAILED
    assert "MAX_DELIVERIES" in row.error


def test_an_answer_while_another_run_holds_the_lease_is_kept_for_that_run(asking):
    invocation = services.start("eager_lease", 4)
    Invocation.objects.filter(pk=invocation.pk).update(lease_owner="another-run")
    services.submit_function_responses([FunctionResponse("eager-4", "ask", {"ok": 8})])
    row = Invocation.objects.get(pk=invocation.pk)
    # Accepted, not run: the lease is that run's, which picks the answer up.
    assert (row.status, row.lease_owner) == (NodeStatus.WAITING, "another-run")
    assert row.interrupts.get(pk="eager-4").status == "resolved"


def test_a_lease_whose_run_never_executed_is_given_back(asking, monkeypatch):
    # The enqueued run does not execute (here: nothing runs the task): the work must not
    # wait for the lease taken for it to expire.
    monkeypatch.setattr(dispatch, "send_run", lambda invocation_id: None)
    invocation = services.start("eager_lease", 5)
    row = Invocation.objects.get(pk=invocation.pk)
    assert (row.status, row.lease_owner, row.lease_expires_at) == (NodeStatus.PENDING, "", None)
