"""HITL["DURABILITY"] on PostgreSQL: "sync" (the default) makes every node transition
durable before the next body starts; "async" commits a transition in the middle of a
pass without waiting for the disk, and keeps every other commit durable (the pass's end,
questions, effects, answers, and any write inside a caller's transaction). CI runs this
on PostgreSQL; elsewhere it is skipped with the reason."""

import json

import pytest
from django.db import connection, transaction
from django.test import override_settings

from tests.integration.worker import require_postgres
from tests.sent import sent_statements
from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.state import InvocationRecord, WriteBatch
from workflows.engine.status import NodeStatus
from workflows.models import Invocation, NodeRun, Session
from workflows.store import DjangoStore, functions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chain(register_workflow):
    require_postgres("the durability setting is PostgreSQL's synchronous_commit")

    @node
    def first(node_input):
        return node_input + 1

    @node
    def second(node_input):
        return node_input + 1

    @node
    def ask(node_input):
        return RequestInput(interrupt_id=f"durable-{node_input}", payload=node_input)

    @node
    def after(node_input):
        return node_input["ok"]

    workflow = Workflow(name="durability_chain", edges=[("START", first, second, ask, after)])
    return register_workflow(workflow)


def _durable_flags(value: int) -> list[tuple[bool, bool, bool]]:
    """Run the chain to its end; each transition the function wrote, as (durable, gives
    the lease back, finishes the invocation)."""
    name, _ = functions.definition("default")
    with sent_statements() as sent:
        services.start("durability_chain", value)
        services.submit_function_responses(
            [FunctionResponse(f"durable-{value + 2}", "ask", {"ok": value})]
        )
    calls = [params for query, params in sent if query.startswith(f"SELECT {name}(")]
    documents = [json.loads(params[2]) for params in calls]
    return [(d["durable"], d["release"], bool(d.get("final"))) for d in documents]


def test_sync_makes_every_transition_durable(chain):
    flags = _durable_flags(1)
    assert flags and all(durable for durable, _, _ in flags)


def test_async_waits_for_the_disk_only_at_the_end_of_a_pass(chain):
    with override_settings(HITL={"DURABILITY": "async"}):
        flags = _durable_flags(2)
    mid_pass = [durable for durable, release, final in flags if not (release or final)]
    ends = [durable for durable, release, final in flags if release or final]
    assert mid_pass and not any(mid_pass), flags
    assert ends and all(ends), flags
    invocation = Invocation.objects.get(input=2)
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, 2)
    statuses = set(NodeRun.objects.filter(invocation=invocation).values_list("status", flat=True))
    assert statuses == {NodeStatus.COMPLETED}


def _step() -> WriteBatch:
    """A mid-pass step of an invocation leased to "me"."""
    invocation = Invocation.objects.create(
        session=Session.objects.create(), workflow_name="x", input=0, lease_owner="me"
    )
    record = InvocationRecord(str(invocation.pk), "x", status=NodeStatus.RUNNING)
    return WriteBatch(str(invocation.pk), invocation=record, lease_owner="me")


def test_a_step_inside_a_callers_transaction_stays_durable(chain):
    store = DjangoStore()
    with override_settings(HITL={"DURABILITY": "async"}):
        batch = _step()
        assert store.dialect._durable(batch) is False  # alone: its own transaction
        with transaction.atomic():
            assert store.dialect._durable(batch) is True


@pytest.mark.parametrize(("durable", "setting"), [(False, "off"), (True, "on")])
def test_the_function_turns_synchronous_commit_off_for_its_transaction_only(
    chain, durable, setting
):
    name, _ = functions.definition("default")
    batch = _step()
    document = {
        "owner": "me", "seconds": 6.0, "release": False, "set": False, "runs": [],
        "events": [], "consumed": [], "deferred": [], "durable": durable,
    }  # fmt: skip
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO on")
        cursor.execute(f"SELECT {name}(%s, now(), %s)", [batch.invocation_id, json.dumps(document)])
        assert cursor.fetchone() == (True,)
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == (setting,)
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
