"""On PostgreSQL a node transition is one call of the store's PL/pgSQL function
(workflows/store/functions.py), installed after every migrate; without it the store
writes the one-statement CTE, with the same outcome. CI runs this on PostgreSQL;
elsewhere it is skipped with the reason."""

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from tests.integration.worker import require_postgres
from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.status import NodeStatus
from workflows.models import Invocation, NodeRun
from workflows.store import functions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chain(register_workflow):
    require_postgres("the store's function is PostgreSQL's")

    @node
    def double(node_input):
        return node_input * 2

    @node
    def ask(node_input):
        return RequestInput(interrupt_id=f"function-{node_input}", payload=node_input)

    @node
    def after(node_input):
        return node_input["ok"]

    return register_workflow(Workflow(name="function_chain", edges=[("START", double, ask, after)]))


def _run_recorded(value: int) -> tuple[Invocation, list[str]]:
    """Start and answer the chain, recording every statement psycopg sends."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recording(cursor, query, *args, **kwargs):
        sent.append(str(query))
        return execute(cursor, query, *args, **kwargs)

    psycopg.Cursor.execute = recording
    try:
        services.start("function_chain", value)
        services.submit_function_responses(
            [FunctionResponse(f"function-{value * 2}", "ask", {"ok": value})]
        )
    finally:
        psycopg.Cursor.execute = execute
    invocation = Invocation.objects.get(input=value)
    return invocation, sent


def _outcome(invocation: Invocation) -> tuple:
    runs = NodeRun.objects.filter(invocation=invocation).order_by("path")
    return (
        invocation.status,
        invocation.output,
        invocation.lease_owner,
        [(r.path, r.status, r.output) for r in runs],
        invocation.events.count(),
        invocation.interrupts.get().consumed,
    )


def test_node_transitions_are_calls_of_the_function_with_the_ctes_outcome(chain, monkeypatch):
    name, _ = functions.definition("default")
    assert functions.installed("default")
    invocation, sent = _run_recorded(3)
    calls = [s for s in sent if s.startswith(f"SELECT {name}(")]
    assert len(calls) >= 3  # double done, ask waiting... after done
    assert not [s for s in sent if s.startswith("WITH inv AS")]
    with_function = _outcome(invocation)
    assert with_function[:2] == (NodeStatus.COMPLETED, 3)

    monkeypatch.setitem(functions._installed, "default", False)
    invocation, sent = _run_recorded(4)
    assert not [s for s in sent if s.startswith(f"SELECT {name}(")]
    assert [s for s in sent if s.startswith("WITH inv AS")]
    without = _outcome(invocation)
    assert without[:2] == (NodeStatus.COMPLETED, 4)
    # Alike but for the values: the paths and statuses, the lease, events, consumption.
    strip = lambda o: (o[0], o[2], [(p, s) for p, s, _ in o[3]], o[4], o[5])  # noqa: E731
    assert strip(with_function) == strip(without)


def test_a_step_without_the_lease_writes_nothing(chain):
    invocation, _ = _run_recorded(5)
    name, _ = functions.definition("default")
    with connection.cursor() as cursor:
        # The invocation is finished and not leased to "nobody": the call is refused.
        cursor.execute(
            f"SELECT {name}(%s, 'nobody', 60, true, true, 'FAILED', NULL, '', true, now(), "
            + ", ".join(["'{}'"] * (len(functions.parameters("default")) - 10))
            + ")",
            [invocation.pk],
        )
        assert cursor.fetchone()[0] is False
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.COMPLETED


def test_migrate_installs_the_function_of_this_code_and_drops_earlier_shapes(chain):
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE FUNCTION {functions.PREFIX}000000000000() RETURNS int "
            "AS 'SELECT 1' LANGUAGE sql"
        )
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT proname FROM pg_proc WHERE proname LIKE %s", [functions.PREFIX + "%"]
        )
        assert [r[0] for r in cursor.fetchall()] == [functions.definition("default")[0]]
