"""Management commands: seed_demo and check_checkpoints."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from workflows import services
from workflows.models import Interrupt, Invocation, NodeRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_seed_demo_creates_the_login_and_waiting_invocations():
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "demo / demo" in out.getvalue()
    assert Invocation.objects.filter(status="WAITING").count() == 4
    assert Invocation.objects.filter(status="COMPLETED").count() == 1
    assert Interrupt.objects.filter(status="pending").count() == 5
    call_command("seed_demo", stdout=StringIO())  # a second run seeds nothing more
    assert Invocation.objects.count() == 5


def test_check_checkpoints_agrees_after_real_runs_and_reports_a_tampered_row():
    call_command("seed_demo", stdout=StringIO())
    for question in Interrupt.objects.filter(workflow_name="document_signoff"):
        services.submit_function_responses([{"id": question.id, "response": {"approved": True}}])
    out = StringIO()
    call_command("check_checkpoints", stdout=out)
    assert "5 invocation(s) checked, 0 disagree" in out.getvalue()

    tampered = NodeRun.objects.get(path="document_signoff@1/summarize@1")
    tampered.output = {"approved": False}
    tampered.save()
    out = StringIO()
    with pytest.raises(CommandError, match="1 disagree"):
        call_command("check_checkpoints", stdout=out)
    assert "document_signoff@1/summarize@1: output" in out.getvalue()
