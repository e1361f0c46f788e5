"""Google ADK 2.13's RemoteA2aAgent against our A2A agent (DESIGN 4.5, "Proof against real
clients"): ADK turns our question into a long-running function call, pauses its run, and
resumes it when the user's function_response goes back. ADK runs in a virtualenv of its
own (HITL_TEST_ADK_PYTHON, made by .ci/run from tests/protocols/adk-requirements.txt),
driving docs/examples/a2a_adk_remote_agent.py against the site served here."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.asking import APPROVAL, WORKFLOW
from tests.protocols.a2a_serving import serve_a2a_site, starter, token_of
from workflows.engine import InterruptStatus
from workflows.models import Interrupt, Invocation

__all__ = ["serve_a2a_site"]  # the fixture `a2a_site`: the site, served

ADK_PYTHON = os.environ.get("HITL_TEST_ADK_PYTHON", "")
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "a2a_adk_remote_agent.py"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not ADK_PYTHON,
        reason="needs google-adk: set HITL_TEST_ADK_PYTHON to the python of a virtualenv "
        "with tests/protocols/adk-requirements.txt installed (.ci/run makes one)",
    ),
]


def test_adks_remote_agent_pauses_on_our_question_and_resumes_with_the_answer(a2a_site):
    amy = starter("amy")
    request = {"message": "Approve the laptop?", "response_schema": APPROVAL}
    node_input = {"request": {**request, "assignees": ["user:amy"]}}
    command = [ADK_PYTHON, str(EXAMPLE), "--url", a2a_site, "--token", token_of(amy)]
    command += ["--workflow", WORKFLOW, "--input", json.dumps(node_input)]
    command += ["--answer", json.dumps({"approved": True, "comment": "fine"})]

    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Paused on question" in ran.stdout and "Approve the laptop?" in ran.stdout
    question = Interrupt.objects.get()
    assert question.status == InterruptStatus.RESOLVED and question.resolved_by == amy
    assert question.response == {"approved": True, "comment": "fine"}
    assert Invocation.objects.get().status == "COMPLETED"
