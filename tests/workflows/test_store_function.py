"""On PostgreSQL a node transition is one call of the store's PL/pgSQL function
(workflows/store/functions.py), installed after every migrate; without it the store
writes the one-statement CTE, with the same outcome. CI runs this on PostgreSQL;
elsewhere it is skipped with the reason."""

import pytest
from django.core.management import call_command
from django.db import connection

from tests.integration.worker import require_postgres
from tests.sent import sent_statements
from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.events import Event, FunctionCall
from workflows.engine.state import InvocationRecord, NodeRunState, WriteBatch
from workflows.engine.status import NodeStatus
from workflows.models import Invocation, NodeRun, Session, SessionEvent
from workflows.store import DjangoStore, functions

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
    with sent_statements() as sent:
        services.start("function_chain", value)
        services.submit_function_responses(
            [FunctionResponse(f"function-{value * 2}", "ask", {"ok": value})]
        )
    invocation = Invocation.objects.get(input=value)
    return invocation, [query for query, _ in sent]


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
            f"SELECT {name}(%s, now(), %s)",
            [
                invocation.pk,
                '{"owner": "nobody", "seconds": 60, "release": true, "set": true, '
                '"status": "FAILED", "output": null, "error": "", "final": true, '
                '"runs": [], "events": [], "consumed": [], "deferred": []}',
            ],
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


def _leased_invocation() -> Invocation:
    return Invocation.objects.create(
        session=Session.objects.create(),
        workflow_name="function_chain",
        workflow_version="1",
        status=NodeStatus.RUNNING,
        lease_owner="owner",
    )


def _rich_batch(invocation_id: str) -> WriteBatch:
    """A transition with every column given a value that is not its default, and the
    values that are stored as SQL NULL (no gate, no lineage)."""
    runs = {
        "wf@1/a@1": NodeRunState(
            status=NodeStatus.COMPLETED,
            run_id=2,
            output={"b": [1, 2.5, None, "é'\""]},
            interrupt_ids={"q2", "q1"},
            attempt=3,
            name="a",
            parent_path="wf@1",
            input="text",
            route="left",
            resume_inputs={"q1": {"ok": True}},
            error="boom",
            gate={"decision": "approved"},
            triggered_by={"x": "wf@1/x@1"},
        ),
        "wf@1/b@1": NodeRunState(status=NodeStatus.RUNNING, run_id=1, name="b", input=None),
    }
    event = Event(
        invocation_id=invocation_id,
        author="a",
        path="wf@1/a@1",
        run_id=2,
        status=NodeStatus.COMPLETED,
        output=[1, {"k": "v"}],
        route="left",
        function_calls=[FunctionCall("c1", "ask", {"x": 1})],
        function_responses=[FunctionResponse("c0", "ask", {"ok": True})],
        long_running_tool_ids=["c1"],
        error="e",
        timestamp=1765000000.123456,
        rewound=True,
        replaces=7,
    )
    plain = Event(invocation_id=invocation_id, author="b", path="wf@1/b@1", run_id=1, timestamp=2.5)
    invocation = Invocation.objects.get(pk=invocation_id)
    record = InvocationRecord(
        id=invocation_id,
        workflow_name="function_chain",
        status=NodeStatus.COMPLETED,
        input=None,
        output={"done": 1},
        error=None,
        session_id=str(invocation.session_id),
    )
    return WriteBatch(
        invocation_id,
        invocation=record,
        node_runs=runs,
        events=[event, plain],
        lease_owner="owner",
        release_lease=True,
    )


def _stored(invocation: Invocation) -> tuple:
    invocation.refresh_from_db()
    left_out = {"id", "invocation", "created_at", "updated_at"}
    fields = lambda model: [f.name for f in model._meta.concrete_fields if f.name not in left_out]  # noqa: E731
    runs = NodeRun.objects.filter(invocation=invocation).order_by("id")
    with connection.cursor() as cursor:  # SQL NULL, not JSON null (both read as None)
        cursor.execute(
            "SELECT gate IS NULL, triggered_by IS NULL FROM workflows_noderun "
            "WHERE invocation_id = %s ORDER BY id",
            [invocation.pk],
        )
        nulls = cursor.fetchall()
    events = SessionEvent.objects.filter(invocation=invocation).order_by("id")
    return (
        invocation.status,
        invocation.output,
        invocation.error,
        invocation.lease_owner,
        invocation.finished_at is not None,
        list(runs.values_list(*fields(NodeRun))),
        list(events.values_list(*fields(SessionEvent))),
        nulls,
    )


def test_the_function_stores_every_value_as_the_cte_does(chain, monkeypatch):
    """The batch's JSON document decoded by the server gives each column the value the
    CTE's per-column parameters give it: JSON values, texts, numbers, SQL NULLs."""
    store = DjangoStore()
    with_function = _leased_invocation()
    assert not store.commit_sync(_rich_batch(str(with_function.pk)))
    monkeypatch.setitem(functions._installed, "default", False)
    with_cte = _leased_invocation()
    assert not store.commit_sync(_rich_batch(str(with_cte.pk)))
    stored = _stored(with_function)
    assert stored == _stored(with_cte)
    runs = stored[5]
    assert [r[-1] for r in runs] == [{"x": "wf@1/x@1"}, None]  # lineage, else SQL NULL
    assert stored[:5] == (NodeStatus.COMPLETED, {"done": 1}, "", "", True)
    assert stored[7] == [(False, False), (True, True)]
