"""HITL["POSTGRES_PREPARED_STATEMENTS"]: the store's statements run prepared (server-side
binding) on PostgreSQL, with every guarantee of the default mode. CI runs this on
PostgreSQL; elsewhere it is skipped with the reason."""

import threading

import pytest
from django.db import OperationalError, connection, transaction
from django.test import override_settings

from tests.integration.worker import require_postgres
from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.errors import LeaseLostError
from workflows.engine.state import WriteBatch
from workflows.engine.status import NodeStatus
from workflows.models import Invocation, NodeRun
from workflows.registry import registry
from workflows.store import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

PREPARED = override_settings(HITL={"POSTGRES_PREPARED_STATEMENTS": True})


@pytest.fixture
def chain() -> Workflow:
    require_postgres("prepared statements are a PostgreSQL option")

    @node
    def double(node_input):
        return node_input * 2

    @node
    def ask(node_input):
        return RequestInput(interrupt_id=f"prepared-{node_input}", payload=node_input)

    @node
    def after(node_input):
        return node_input["ok"]

    workflow = Workflow(name="prepared_chain", edges=[("START", double, ask, after)])
    registry.register(workflow)
    yield workflow
    registry.unregister(workflow.name)


def _prepared_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return cursor.fetchone()[0]


def test_a_run_and_its_resume_use_prepared_statements(chain):
    with PREPARED:
        invocation = services.start("prepared_chain", 21)
        invocation.refresh_from_db()
        assert invocation.status == NodeStatus.WAITING
        assert _prepared_count() > 0
        services.submit_function_responses([FunctionResponse("prepared-42", "ask", {"ok": 7})])
    invocation.refresh_from_db()
    assert (invocation.status, invocation.output) == (NodeStatus.COMPLETED, 7)
    assert NodeRun.objects.get(invocation=invocation, path="prepared_chain@1/double@1").output == 42


def test_without_the_option_nothing_is_prepared(chain):
    invocation = services.start("prepared_chain", 1)
    invocation.refresh_from_db()
    assert invocation.status == NodeStatus.WAITING
    assert _prepared_count() == 0


def test_a_prepared_write_under_a_lease_another_run_holds_is_refused(chain):
    """The lease condition holds in prepared mode too; nothing of the batch is written."""
    with PREPARED:
        invocation = services.start("prepared_chain", 5)
        store = DjangoStore()
        invocation_id = str(invocation.pk)
        assert store.acquire_lease_sync(invocation_id, "worker-a", 60) is not None
        with pytest.raises(LeaseLostError):
            store.commit_sync(WriteBatch(invocation_id, invocation=None, lease_owner="worker-b"))
        assert Invocation.objects.get(pk=invocation.pk).lease_owner == "worker-a"


def test_a_prepared_statement_reports_database_errors_as_django_errors(chain):
    """A lock timeout on a prepared statement is Django's OperationalError with the
    server's SQLSTATE, so write transactions retry it as in the default mode."""
    with PREPARED:
        invocation = services.start("prepared_chain", 3)
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                Invocation.objects.select_for_update().get(pk=invocation.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert locked.wait(10)
        with PREPARED, transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '50ms'")
            with pytest.raises(OperationalError) as raised:
                DjangoStore().lock_invocation_sync(str(invocation.pk))
        assert raised.value.__cause__.sqlstate == "55P03"
    finally:
        release.set()
        holder.join(10)
