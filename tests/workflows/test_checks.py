"""System checks: each fires with its id and a hint on the mistake it is for, and stays
silent on a correct set-up (the test settings are one)."""

from collections.abc import Iterator

import pytest
from celery import Celery, current_app
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from workflows import checks
from workflows.engine import Workflow, node
from workflows.registry import WorkflowRegistry


@node
def step(node_input):
    return node_input


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_the_project_as_configured_passes_every_check():
    # E002 looks at the process-wide registry, where other tests register workflows of
    # their own; it has tests of its own below.
    messages = [m for m in run_checks() if m.id.startswith(("workflows.", "approvals."))]
    assert [m for m in messages if m.id != "workflows.E002"] == []


def test_the_checks_run_with_manage_py_check():
    with override_settings(HITL={"LEASE_SECOND": 30}):
        assert "workflows.E003" in ids(run_checks())


# --- workflows.E001: the Celery app reads Django settings ------------------------------------


@pytest.fixture
def unconfigured_celery_app() -> Iterator[Celery]:
    """What a project without celery.py has: Celery's app, not reading Django settings."""
    project_app = current_app._get_current_object()
    app = Celery("unconfigured", set_as_current=True)
    try:
        yield app
    finally:
        project_app.set_current()


def test_celery_app_reading_django_settings_is_silent():
    assert checks.check_celery_reads_django_settings() == []


def test_celery_app_ignoring_django_settings(unconfigured_celery_app):
    (error,) = checks.check_celery_reads_django_settings()
    assert error.id == "workflows.E001"
    assert "does not read the Django settings" in error.msg
    assert "namespace='CELERY'" in error.hint


def test_celery_not_configured_at_all(unconfigured_celery_app, monkeypatch):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    with override_settings():
        for name in [n for n in dir(settings) if n.startswith("CELERY_")]:
            delattr(settings, name)
        (error,) = checks.check_celery_reads_django_settings()
    assert error.id == "workflows.E001"
    assert "Celery is not configured" in error.msg
    assert "celery.py" in error.hint


# --- workflows.W001 / E002: registered workflows ----------------------------------------------


def test_no_workflow_registered(monkeypatch):
    monkeypatch.setattr(checks, "registry", WorkflowRegistry())
    (warning,) = checks.check_workflows_registered()
    assert warning.id == "workflows.W001"
    assert "WORKFLOW_MODULES" in warning.hint


def test_a_name_two_modules_register(monkeypatch):
    local = WorkflowRegistry()
    local.register(Workflow(name="refund", edges=[("START", step)]))
    exec(
        "registry.register(workflow)",
        {
            "__name__": "billing.workflows",
            "registry": local,
            "workflow": Workflow(name="refund", edges=[("START", step)]),
        },
    )
    monkeypatch.setattr(checks, "registry", local)
    (error,) = checks.check_workflows_registered()
    assert error.id == "workflows.E002"
    assert "'refund' is registered by 2 modules: billing.workflows, tests.workflows" in error.msg


def test_versions_of_one_workflow_from_one_module_are_fine(monkeypatch):
    local = WorkflowRegistry()
    local.register(Workflow(name="refund", edges=[("START", step)]), version="1")
    local.register(Workflow(name="refund", edges=[("START", step)]), version="2")
    monkeypatch.setattr(checks, "registry", local)
    assert checks.check_workflows_registered() == []


# --- workflows.E003 / E004: the HITL dict -----------------------------------------------------


@pytest.mark.parametrize(
    "hitl",
    [
        {},
        {"LEASE_SECONDS": 30.5, "MAX_DELIVERIES": 3},  # a float is a fine number of seconds
        {"WORKFLOW_MODULES": ("myapp.flows",), "EMAIL_NOTIFICATIONS": True},
    ],
)
def test_valid_hitl_settings_are_silent(hitl):
    with override_settings(HITL=hitl):
        assert checks.check_hitl_settings() == []


def test_unknown_key_suggests_the_closest():
    with override_settings(HITL={"LEASE_SECOND": 30}):
        (error,) = checks.check_hitl_settings()
    assert error.id == "workflows.E003"
    assert error.msg == "HITL has an unknown key 'LEASE_SECOND'."
    assert error.hint.startswith("Did you mean 'LEASE_SECONDS'? Known keys: ")


def test_hitl_must_be_a_dict():
    with override_settings(HITL=["LEASE_SECONDS"]):
        (error,) = checks.check_hitl_settings()
    assert error.id == "workflows.E003"
    assert error.msg == "HITL must be a dict, not list."


@pytest.mark.parametrize(
    ("hitl", "message"),
    [
        ({"LEASE_SECONDS": "60"}, "HITL[\"LEASE_SECONDS\"] is str '60'; it must be int or float."),
        ({"MAX_DELIVERIES": True}, 'HITL["MAX_DELIVERIES"] is bool True; it must be int or float.'),
        ({"WORKFLOW_MODULES": "myapp.flows"}, "it must be list or tuple."),
        ({"EMAIL_NOTIFICATIONS": 1}, "it must be bool."),
        ({"DURABILITY": "fast"}, "HITL[\"DURABILITY\"] is 'fast'; it must be 'sync' or 'async'."),
    ],
)
def test_wrong_value_types(hitl, message):
    with override_settings(HITL=hitl):
        (error,) = checks.check_hitl_settings()
    assert error.id == "workflows.E004"
    assert message in error.msg
    assert error.hint.startswith("The default is ")


def test_keys_and_types_come_from_the_defaults(monkeypatch):
    monkeypatch.setitem(checks.DEFAULTS, "NEW_LIMIT", 5)
    with override_settings(HITL={"NEW_LIMIT": 6}):
        assert checks.check_hitl_settings() == []
    with override_settings(HITL={"NEW_LIMIT": "6"}):
        assert ids(checks.check_hitl_settings()) == ["workflows.E004"]
