"""Celery work is enqueued by registered task name: a run is published on commit with the
bounded retry policy, a failure to publish is a warning and not the caller's error, and a
task this process does not know is published by name for a worker that does."""

import logging

import pytest
from celery import current_app
from celery.exceptions import NotRegistered
from kombu.exceptions import OperationalError

from workflows import dispatch, services
from workflows.engine.status import NodeStatus
from workflows.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_broker_that_cannot_take_the_run_leaves_the_start_stored_and_warns(monkeypatch, caplog):
    published = []

    def broker_down(**options):
        published.append(options)
        raise OperationalError("connection refused")

    run_task = dispatch.registered_task(dispatch.RUN_INVOCATION)
    monkeypatch.setitem(current_app.conf, "task_always_eager", False)  # a broker, not eager
    monkeypatch.setattr(run_task, "apply_async", broker_down)
    with caplog.at_level(logging.WARNING, logger="workflows.dispatch"):
        invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.PENDING
    assert published == [
        {
            "args": [str(invocation.pk)],
            "retry": True,
            "retry_policy": {"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
        }
    ]
    assert f"run of invocation {invocation.pk} not started" in caplog.text
    assert "recover_stalled will start it" in caplog.text


def test_a_task_this_process_does_not_know_is_published_by_name(monkeypatch):
    app = current_app._get_current_object()
    sent = []
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append((name, options)))
    dispatch.send("reports.tasks.weekly", [7], countdown=5)
    assert sent == [("reports.tasks.weekly", {"args": [7], "countdown": 5})]


def test_an_eager_run_is_the_task_called_in_process_without_celerys_apply(monkeypatch):
    run_task = dispatch.registered_task(dispatch.RUN_INVOCATION)
    monkeypatch.setattr(run_task, "apply_async", lambda **options: pytest.fail("applied"))
    invocation = services.start("test_expense", {"employee": "Ada", "amount": 420.0})
    assert Invocation.objects.get(pk=invocation.pk).status == NodeStatus.WAITING


def test_eager_mode_needs_the_task_itself():
    with pytest.raises(NotRegistered):
        dispatch.send("reports.tasks.weekly", [7])
