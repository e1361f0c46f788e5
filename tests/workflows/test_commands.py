"""Management commands: check_checkpoints (seed_demo is the demo project's: tests/hitl_site)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from workflows.models import Invocation, NodeRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_check_checkpoints_agrees_after_real_runs_and_reports_a_tampered_row():
    call_command("seed_demo", stdout=StringIO())  # answered, looped and waiting runs
    out = StringIO()
    call_command("check_checkpoints", stdout=out)
    assert "8 invocation(s) checked, 0 disagree" in out.getvalue()

    grace = Invocation.objects.get(input__employee="Grace")
    tampered = NodeRun.objects.get(invocation=grace, path="expense_approval@1/decide@1")
    tampered.output = {"approved": False}
    tampered.save()
    out = StringIO()
    with pytest.raises(CommandError, match="1 disagree"):
        call_command("check_checkpoints", stdout=out)
    assert "expense_approval@1/decide@1: output" in out.getvalue()
