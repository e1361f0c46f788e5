"""Management commands: check_checkpoints (seed_demo is the demo project's: tests/hitl_site)."""

from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from tests.factories import ApproverFactory
from workflows import services
from workflows.models import Interrupt, Invocation, NodeRun

pytestmark = pytest.mark.django_db(transaction=True)


def answer_pending(invocation: Invocation, response: dict, actor) -> None:
    question = Interrupt.objects.get(invocation=invocation, status="pending")
    services.decide(question.id, response, actor=actor)


def test_check_checkpoints_agrees_after_real_runs_and_reports_a_tampered_row():
    staff = ApproverFactory()
    staff.groups.add(*(Group.objects.create(name=name) for name in ("managers", "editors")))
    # Answered, looped, parallel and waiting runs.
    grace = services.start("test_expense", {"employee": "Grace", "amount": 89.5})
    answer_pending(
        services.start("test_expense", {"employee": "Alan", "amount": 300}),
        {"approved": False, "comment": "taxi"},
        staff,
    )
    answer_pending(services.start("test_drafting", {"title": "Policy"}), {"approved": False}, staff)
    services.start("test_expense", {"employee": "Linus", "amount": 2500})
    services.start("test_moderation", {"posts": ["one", "two"]})
    out = StringIO()
    call_command("check_checkpoints", stdout=out)
    assert "5 invocation(s) checked, 0 disagree" in out.getvalue()

    tampered = NodeRun.objects.get(invocation=grace, path="test_expense@1/decide@1")
    tampered.output = {"approved": False}
    tampered.save()
    out = StringIO()
    with pytest.raises(CommandError, match="1 disagree"):
        call_command("check_checkpoints", stdout=out)
    assert "test_expense@1/decide@1: output" in out.getvalue()
