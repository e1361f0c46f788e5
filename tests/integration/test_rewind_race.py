"""A rewind racing a running drive on PostgreSQL (DESIGN 3.8): while an execution holds
the invocation's lease the rewind is refused (`running`) and stores nothing; once the
drive is done the same rewind goes through and only the dependent step runs again."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connection

from workflows import services
from workflows.engine import FunctionResponse, RequestInput, Workflow, node
from workflows.engine.errors import NotRewindableError
from workflows.engine.status import NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent
from workflows.registry import registry

from .worker import require_postgres

pytestmark = pytest.mark.postgres

WAIT = 60.0
RACE = "race_rewind"
started, release = threading.Event(), threading.Event()
runs: list[object] = []


@node(name="ask")
def ask(node_input: object) -> RequestInput:
    return RequestInput(interrupt_id=f"race-{node_input}", message="how many?")


@node(name="slow")
def slow(node_input: object) -> object:
    runs.append(node_input)
    started.set()
    assert release.wait(WAIT), "the test never released the running step"
    return {"counted": node_input}


@pytest.fixture
def race_workflow(transactional_db) -> Iterator[None]:
    require_postgres("a second connection sees the lease of a running drive")
    registry.register(Workflow(name=RACE, edges=[("START", ask, slow)]))
    started.clear()
    release.clear()
    runs.clear()
    yield
    registry.unregister(RACE)


def rows(invocation_id: object) -> tuple:
    return (
        list(Invocation.objects.filter(pk=invocation_id).values("status", "output", "rewound")),
        list(NodeRun.objects.filter(invocation_id=invocation_id).values_list("path", "status")),
        list(Interrupt.objects.filter(invocation_id=invocation_id).values("status", "response")),
        SessionEvent.objects.filter(invocation_id=invocation_id).count(),
    )


def test_a_rewind_waits_for_the_running_drive(race_workflow):
    invocation = services.start(RACE, node_input=1)
    interrupt_id = "race-1"
    errors: list[BaseException] = []

    def answer() -> None:
        try:  # the drive runs in this thread on commit (tasks are eager in the tests)
            services.submit_function_responses([FunctionResponse(interrupt_id, "a", 3)])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    driving = threading.Thread(target=answer)
    driving.start()
    assert started.wait(WAIT), "the drive never reached the slow step"
    before = rows(invocation.pk)
    with pytest.raises(NotRewindableError) as refused:
        services.rewind(interrupt_id, 5, actor=None)
    assert refused.value.reason == "running"
    assert rows(invocation.pk) == before
    release.set()
    driving.join(WAIT)
    assert not driving.is_alive() and not errors, errors
    assert Invocation.objects.get(pk=invocation.pk).output == {"counted": 3}

    services.rewind(interrupt_id, 5, actor=None)
    done = Invocation.objects.get(pk=invocation.pk)
    assert done.status == NodeStatus.COMPLETED and done.output == {"counted": 5}
    assert runs == [3, 5]
    statuses = dict(NodeRun.objects.filter(invocation=done).values_list("path", "status"))
    assert statuses[f"{RACE}@1/slow@1"] == NodeStatus.SUPERSEDED
    assert statuses[f"{RACE}@1/slow@2"] == NodeStatus.COMPLETED
