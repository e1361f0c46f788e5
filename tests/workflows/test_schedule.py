"""The periodic jobs are one list (workflows/schedule.py): the beat schedule of the demo
and of docs/embedding.md is built from it, `hitl_periodic` runs every job in it, the
system check workflows.W003 warns when a project's beat schedule misses one, and the two
pages that list the jobs list exactly these."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from workflows import dispatch
from workflows.conf import hitl_settings
from workflows.management.commands.hitl_periodic import Command
from workflows.models import IdempotencyKey
from workflows.schedule import PERIODIC_JOBS, PeriodicJob, beat_schedule

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[2] / "docs"
BEGIN = (
    "<!-- periodic jobs: generated from workflows/schedule.py; "
    "tests/workflows/test_schedule.py checks it -->"
)
END = "<!-- end of the periodic jobs -->"
TASKS = [job.task for job in PERIODIC_JOBS]


def period(job: PeriodicJob) -> str:
    seconds = int(job.every.total_seconds())
    shown = f"{seconds // 3600} h" if seconds % 3600 == 0 else f"{seconds} s"
    if job.every_setting:
        shown += f" (`hitl_periodic`: `{job.every_setting}`)"
    return shown


def jobs_table() -> str:
    """What the docs list between BEGIN and END."""
    rows = [
        f"| `{job.entry}` | `{job.task}` | {period(job)} | {job.does} |" for job in PERIODIC_JOBS
    ]
    return "\n".join(["| beat entry | task | every | what it does |", "|---|---|---|---|", *rows])


@pytest.mark.parametrize("page", ["embedding.md", "deployment.md"])
def test_the_docs_list_exactly_the_periodic_jobs(page):
    text = (DOCS / page).read_text()
    found = re.search(re.escape(BEGIN) + r"\n(.*?)\n?" + re.escape(END), text, re.S)
    assert found, f"docs/{page} has no list of the periodic jobs between {BEGIN} and {END}"
    assert found.group(1).strip() == jobs_table(), (
        f"docs/{page}: put this between the markers:\n{jobs_table()}"
    )
    # Nowhere else does the page name a periodic task that is not in the list.
    named = set(re.findall(r"workflows\.tasks\.\w+", text))
    assert named <= set(TASKS) | {"workflows.tasks.run_invocation"}, named - set(TASKS)


def test_the_beat_schedules_are_built_from_the_one_list():
    assert beat_schedule() == settings.CELERY_BEAT_SCHEDULE
    assert [entry["task"] for entry in beat_schedule().values()] == TASKS
    assert len(set(TASKS)) == len(TASKS) == len({job.entry for job in PERIODIC_JOBS})
    for task in TASKS:
        assert dispatch.registered_task(task) is not None, f"no Celery task {task}"


def test_hitl_periodic_runs_every_job_of_the_list(monkeypatch):
    ran = []
    for task in TASKS:
        registered = current_app.tasks[task]
        monkeypatch.setattr(registered, "run", lambda task=task: ran.append(task) or 0)
    call_command("hitl_periodic", "--once", stdout=StringIO())
    assert ran == TASKS


def test_hitl_periodic_purges_expired_idempotency_keys():
    user = get_user_model().objects.create_user("client")
    for name in ("old", "fresh"):
        IdempotencyKey.objects.create(
            user=user, key=name, method="POST", path="/api/", request_hash="0", status_code=201
        )
    too_old = timezone.now() - timedelta(seconds=hitl_settings.IDEMPOTENCY_KEY_TTL + 1)
    IdempotencyKey.objects.filter(key="old").update(created_at=too_old)
    out = StringIO()
    call_command("hitl_periodic", "--once", stdout=out)
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]
    assert "purged 1 idempotency key(s)" in out.getvalue()


def test_hitl_periodic_runs_a_job_again_once_its_period_has_passed(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(
        "workflows.management.commands.hitl_periodic.time.monotonic", lambda: clock[0]
    )
    ran = []
    for task in TASKS:
        monkeypatch.setattr(current_app.tasks[task], "run", lambda task=task: ran.append(task) or 0)
    command = Command(stdout=StringIO())
    command.run_jobs("test")
    assert ran == TASKS
    ran.clear()
    clock[0] += 30
    command.run_jobs("test")
    assert ran == [job.task for job in PERIODIC_JOBS if job.every <= timedelta(seconds=30)]
    ran.clear()
    clock[0] += 3600
    command.run_jobs("test")
    assert ran == TASKS


def warnings_of_the_schedule() -> list[str]:
    return [m.msg for m in run_checks() if m.id == "workflows.W003"]


def test_a_complete_beat_schedule_passes_the_check():
    assert warnings_of_the_schedule() == []
    with override_settings(CELERY_BEAT_SCHEDULE={**beat_schedule(), "mine": {"task": "x"}}):
        assert warnings_of_the_schedule() == []


@pytest.mark.parametrize("left_out", TASKS)
def test_a_beat_schedule_that_misses_a_job_is_warned_about(left_out):
    schedule = {name: e for name, e in beat_schedule().items() if e["task"] != left_out}
    with override_settings(CELERY_BEAT_SCHEDULE=schedule):
        (warning,) = warnings_of_the_schedule()
    assert "misses 1 periodic job(s)" in warning and left_out in warning


def test_without_a_beat_schedule_there_is_nothing_to_warn_about():
    with override_settings(CELERY_BEAT_SCHEDULE={}):
        assert warnings_of_the_schedule() == []
