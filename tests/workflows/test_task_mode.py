"""Where tasks run: hitl_status says which mode it sees and why, and a `celery worker` that
could receive no task (eager mode, an in-memory broker) refuses to start."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from celery import current_app
from django.utils import timezone

from workflows.models import Heartbeat
from workflows.task_mode import refuse_receiving_nothing

from .test_operations import Sender, periodic_jobs_ran, status

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BROKER = "redis://:s3cret@broker.example:6379/5"


@pytest.fixture
def celery_conf(monkeypatch):
    """Celery's configuration, changed for one test (nothing is sent meanwhile); the
    environment's CELERY_BROKER_URL, which Celery prefers, is out of the way."""
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    conf = current_app.conf
    saved = {key: conf[key] for key in ("broker_url", "task_always_eager")}
    yield conf
    conf.update(saved)


def test_status_names_eager_mode_and_why(celery_conf):
    periodic_jobs_ran()
    code, out, err = status()
    assert code == 0, err
    assert (
        "Tasks: eager (CELERY_TASK_ALWAYS_EAGER is True; CELERY_BROKER_URL is "
        "memory://localhost/, an in-memory transport): runs happen in the process that "
        "starts or answers them; no workers needed"
    ) in out


def test_status_names_the_broker_without_its_password(celery_conf):
    celery_conf.update(broker_url=BROKER, task_always_eager=False)
    periodic_jobs_ran()
    Heartbeat.objects.create(kind=Heartbeat.WORKER, name="celery@one", seen_at=timezone.now())
    code, out, err = status()
    assert code == 0, err
    assert "Tasks: broker redis://:**@broker.example:6379/5: runs happen in Celery workers" in out
    assert "s3cret" not in out
    assert "Workers: 1 alive" in out


def test_status_needs_attention_when_tasks_go_to_an_in_memory_broker(celery_conf):
    celery_conf.update(broker_url="memory://localhost/", task_always_eager=False)
    periodic_jobs_ran()
    code, out, err = status()
    assert code == 1
    assert "Tasks: broker memory://localhost/ (CELERY_BROKER_URL is memory://localhost/, an" in out
    assert "no worker receives them" in out
    assert "attention: tasks are sent to the in-memory broker memory://localhost/" in err


def test_an_eager_worker_refuses_to_start():
    """`celery -A tests.project worker` on the test settings: eager, in-memory broker."""
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env["DJANGO_SETTINGS_MODULE"] = "tests.project.settings"
    command = [sys.executable, "-m", "celery", "-A", "tests.project", "worker", "-P", "solo"]
    try:
        finished = subprocess.run(
            command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired as running:  # it came up and waits for nothing
        pytest.fail(f"the worker started: {running.stdout}")
    assert finished.returncode == 1, finished.stderr
    assert (
        "This Celery worker would receive no tasks: CELERY_TASK_ALWAYS_EAGER is True; "
        "CELERY_BROKER_URL is memory://localhost/, an in-memory transport." in finished.stderr
    )
    assert " ready." not in finished.stdout + finished.stderr


def test_a_worker_on_an_in_memory_broker_refuses_and_one_on_a_real_broker_starts(celery_conf):
    worker = Sender(app=current_app)
    celery_conf.update(broker_url="memory://localhost/", task_always_eager=False)
    with pytest.raises(SystemExit, match="in-memory transport"):
        refuse_receiving_nothing(sender=worker)
    celery_conf.update(broker_url=BROKER)
    refuse_receiving_nothing(sender=worker)  # no refusal
