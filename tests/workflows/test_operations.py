"""What operators run and read: hitl_status (output and exit status), hitl_periodic, the
worker and periodic-job heartbeats, and log records carrying the invocation and node path."""

import logging
import re
from datetime import timedelta
from io import StringIO

import pytest
from celery import current_app, signals
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from workflows import services
from workflows.engine import RequestInput, Workflow, node
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.log import ContextFilter, log_context, node_logger
from workflows.management.commands.hitl_periodic import Command
from workflows.models import Heartbeat, Interrupt, Invocation
from workflows.registry import registry
from workflows.worker import heartbeat

pytestmark = pytest.mark.django_db(transaction=True)

EXPENSE = {"employee": "Ada", "amount": 420.0}


class Sender:
    """Stands in for the worker objects Celery's signals come from (hashable, as they are)."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def status() -> tuple[int, str, str]:
    """Run hitl_status: (exit status, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("hitl_status", stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def periodic_jobs_ran(ago: timedelta = timedelta(0)) -> None:
    Heartbeat.objects.update_or_create(
        kind=Heartbeat.PERIODIC, name="celery beat", defaults={"seen_at": timezone.now() - ago}
    )


@pytest.fixture
def not_eager():
    """Celery as with a real broker (nothing is sent while hitl_status reads)."""
    saved = current_app.conf["broker_url"]
    current_app.conf.update(broker_url="redis://broker.example:6379/0", task_always_eager=False)
    yield
    current_app.conf.update(broker_url=saved, task_always_eager=True)


@node
def chatty(ctx, node_input):
    logging.getLogger("tests.chatty").info("plain log call")
    node_logger(ctx).info("node logger call")
    return RequestInput(message="ok?")


@pytest.fixture
def chatty_workflow():
    registry.register(Workflow(name="chatty", edges=[("START", chatty)]))
    yield
    registry.unregister("chatty")


# --- hitl_status ------------------------------------------------------------------------------


@pytest.mark.usefixtures("chatty_workflow")
def test_status_is_healthy_and_lists_questions_by_workflow():
    for employee in ("Ada", "Grace"):
        services.start("test_expense", {**EXPENSE, "employee": employee})
    services.start("chatty")
    oldest = Interrupt.objects.filter(workflow_name="test_expense").first()
    Interrupt.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(hours=3))
    periodic_jobs_ran()
    code, out, err = status()
    assert code == 0, err
    assert "Pending questions: 3" in out
    assert "  chatty: 1, oldest asked " in out
    assert "  test_expense: 2, oldest asked 3 h ago" in out
    assert f"Oldest waiting: {oldest.pk} ({oldest.path}), asked 3 h ago" in out
    assert "Workers: none needed (Celery runs tasks eagerly, in-process)" in out
    assert "Periodic jobs: 1 alive" in out
    assert "OK: nothing needs attention" in out


def test_periodic_jobs_never_seen_need_attention():
    code, out, err = status()
    assert code == 1
    assert "Periodic jobs: never seen" in out
    assert "attention: the periodic jobs (expiry, recovery) did not run lately" in err


def test_silent_periodic_jobs_need_attention():
    periodic_jobs_ran(ago=timedelta(minutes=10))
    code, out, err = status()
    assert code == 1
    assert "celery beat: silent, last seen 10 min ago" in out
    assert "did not run lately" in err


def test_overdue_question_needs_attention():
    periodic_jobs_ran()
    invocation = services.start("test_expense", EXPENSE)
    Interrupt.objects.filter(invocation=invocation).update(
        deadline=timezone.now() - timedelta(minutes=5)
    )
    code, out, err = status()
    assert code == 1
    assert "Overdue questions not expired: 1" in out
    assert "1 question(s) past their deadline" in err
    Interrupt.objects.filter(invocation=invocation).update(deadline=timezone.now())
    assert status()[0] == 0  # just due: expiry has not had its chance yet


def test_stalled_invocation_needs_attention():
    periodic_jobs_ran()
    invocation = services.start("test_expense", EXPENSE)
    Invocation.objects.filter(pk=invocation.pk).update(
        status=NodeStatus.PENDING, updated_at=timezone.now() - timedelta(minutes=10)
    )
    code, out, err = status()
    assert code == 1
    assert "Stalled invocations: 1" in out
    assert "1 invocation(s) stalled" in err


def test_answer_not_applied_needs_attention():
    periodic_jobs_ran()
    invocation = services.start("test_expense", EXPENSE)
    Interrupt.objects.filter(invocation=invocation).update(
        status=InterruptStatus.RESOLVED,
        response={"approved": True},
        resolved_at=timezone.now() - timedelta(minutes=10),
    )
    code, out, _ = status()
    assert code == 1
    assert "Stalled invocations: 1" in out
    # An answer a pass saw but could not apply yet (deferred) is not work waiting.
    Interrupt.objects.filter(invocation=invocation).update(deferred=True)
    assert "Stalled invocations: 0" in status()[1]


def test_recent_failures_need_attention():
    periodic_jobs_ran()
    invocation = services.start("test_expense", EXPENSE)
    Invocation.objects.filter(pk=invocation.pk).update(status=NodeStatus.FAILED)
    code, out, err = status()
    assert code == 1
    assert "Failed invocations since " in out and "UTC: 1" in out
    assert "1 invocation(s) FAILED" in err


@pytest.mark.usefixtures("not_eager")
def test_with_a_broker_a_live_worker_is_needed():
    periodic_jobs_ran()
    code, out, err = status()
    assert code == 1
    assert "Workers: never seen" in out
    assert "no Celery worker heartbeat" in err
    signals.worker_ready.send(sender=Sender(hostname="celery@status-test"))
    code, out, err = status()
    assert code == 0, err
    assert "Workers: 1 alive" in out
    assert re.search(r"celery@status-test: alive, last seen \d+ s ago", out)


# --- heartbeats -------------------------------------------------------------------------------


def test_worker_heartbeats_are_recorded_at_most_every_quarter_period():
    beat = Sender(eventer=Sender(hostname="celery@throttled"))
    signals.heartbeat_sent.send(sender=beat)
    row = Heartbeat.objects.get(kind=Heartbeat.WORKER, name="celery@throttled")
    long_ago = timezone.now() - timedelta(hours=1)
    Heartbeat.objects.filter(pk=row.pk).update(seen_at=long_ago)
    signals.heartbeat_sent.send(sender=beat)  # 2 s later, in a real worker
    assert Heartbeat.objects.get(pk=row.pk).seen_at == long_ago
    with override_settings(HITL={"HEARTBEAT_STALE_SECONDS": 0}):
        signals.heartbeat_sent.send(sender=beat)
    assert Heartbeat.objects.get(pk=row.pk).seen_at > long_ago


def test_eager_task_runs_record_no_worker():
    services.start("test_expense", EXPENSE)
    assert not Heartbeat.objects.exists()


def test_periodic_tasks_run_by_a_worker_record_beat_and_worker():
    task = Sender(
        name="workflows.tasks.recover_stalled",
        request=Sender(is_eager=False, hostname="celery@beat-test"),
    )
    signals.task_postrun.send(sender=task, task_id="t1", task=task)
    assert set(Heartbeat.objects.values_list("kind", "name")) == {
        (Heartbeat.PERIODIC, "celery beat"),
        (Heartbeat.WORKER, "celery@beat-test"),
    }


def test_a_heartbeat_that_cannot_be_stored_does_not_raise(monkeypatch, caplog):
    from django.db import DatabaseError

    def broken(**kwargs):
        raise DatabaseError("no such table")

    monkeypatch.setattr(Heartbeat.objects, "update_or_create", broken)
    heartbeat.record(Heartbeat.WORKER, "celery@broken")
    assert "could not record the worker heartbeat of celery@broken" in caplog.text
    caplog.clear()
    # A worker's next heartbeats (every 2 s) do not repeat the warning every time.
    beat = Sender(eventer=Sender(hostname="celery@broken"))
    signals.heartbeat_sent.send(sender=beat)
    assert caplog.text == ""


# --- hitl_periodic ----------------------------------------------------------------------------


def test_hitl_periodic_once_expires_overdue_questions_and_records_its_heartbeat():
    invocation = services.start("test_expense", EXPENSE)
    Interrupt.objects.filter(invocation=invocation).update(
        deadline=timezone.now() - timedelta(seconds=1)
    )
    out = StringIO()
    call_command("hitl_periodic", "--once", stdout=out)
    printed = (
        "expired 1 question(s), applied 0 escalation step(s), "
        "announced 0 delegation(s), re-enqueued 0 run(s)"
    )
    assert printed in out.getvalue()
    question = Interrupt.objects.get(invocation=invocation)
    assert question.status == InterruptStatus.EXPIRED
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.FAILED  # its policy
    (beat,) = Heartbeat.objects.filter(kind=Heartbeat.PERIODIC)
    assert beat.name.startswith("hitl_periodic@")
    code, _, err = status()
    assert "periodic jobs" not in err  # they ran; the failure is what needs attention
    assert code == 1 and "1 invocation(s) FAILED" in err


def test_hitl_periodic_loops_until_stopped(monkeypatch):
    rounds = []
    monkeypatch.setattr(Command, "run_jobs", lambda self, name: rounds.append(name))

    def sleep(seconds):
        assert seconds == 0.5
        if len(rounds) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr("workflows.management.commands.hitl_periodic.time.sleep", sleep)
    out = StringIO()
    call_command("hitl_periodic", "--interval", "0.5", stdout=out)
    assert len(rounds) == 3
    assert out.getvalue().rstrip().endswith("stopped")


# --- log records ------------------------------------------------------------------------------


@pytest.mark.usefixtures("chatty_workflow")
def test_log_records_carry_the_invocation_id_and_node_path(caplog):
    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO)
    invocation = services.start("chatty", None)
    records = {
        r.getMessage(): r for r in caplog.records if r.name.startswith(("tests", "workflows.nodes"))
    }
    plain, adapted = records["plain log call"], records["node logger call"]
    assert plain.invocation_id == str(invocation.pk)  # set while the run task runs
    assert plain.node_path == "chatty@1/chatty@1"  # set while the node body runs
    assert adapted.invocation_id == str(invocation.pk)
    assert adapted.node_path == "chatty@1/chatty@1"


def test_records_outside_a_run_say_so(caplog):
    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO)
    logging.getLogger("tests.outside").info("before")
    with log_context(invocation_id="inv-1", node_path="w@1/n@1"):
        logging.getLogger("tests.outside").info("inside")
    logging.getLogger("tests.outside").info("after")
    assert [(r.invocation_id, r.node_path) for r in caplog.records] == [
        ("-", "-"),
        ("inv-1", "w@1/n@1"),
        ("-", "-"),
    ]


def test_a_worker_heartbeat_reconnects_after_the_database_dropped_it(caplog):
    import psycopg
    from django.db import connection

    from tests.integration.worker import require_postgres

    require_postgres("a server that can end this test's connection")
    heartbeat.record(Heartbeat.WORKER, "celery@reconnect")
    backend_pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])
    heartbeat.record(Heartbeat.WORKER, "celery@reconnect")  # the dropped connection fails
    assert "could not record the worker heartbeat of celery@reconnect" in caplog.text
    before = Heartbeat.objects.get(name="celery@reconnect").seen_at
    heartbeat.record(Heartbeat.WORKER, "celery@reconnect")  # reconnects
    assert Heartbeat.objects.get(name="celery@reconnect").seen_at > before


def test_the_run_task_names_its_invocation_however_it_was_called(caplog):
    from workflows.tasks import run_invocation

    caplog.handler.addFilter(ContextFilter())
    caplog.set_level(logging.INFO)
    invocation = services.start("test_expense", EXPENSE)
    run_invocation.apply(kwargs={"invocation_id": str(invocation.pk)})
    run_invocation.apply(args=[str(invocation.pk)])
    done = [r for r in caplog.records if "succeeded" in r.getMessage()]
    assert [r.invocation_id for r in done[-2:]] == [str(invocation.pk)] * 2
    logging.getLogger("tests.after").info("after")
    assert caplog.records[-1].invocation_id == "-"  # each run gave its context back
