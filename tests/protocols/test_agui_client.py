"""The real AG-UI client, @ag-ui/client 1.0.0 (npm, tests/protocols/js), against the
agui/ endpoint under uvicorn on PostgreSQL: its HttpAgent runs a workflow, its verifier
accepts our event stream (it checks the order and refuses the run otherwise), the run
finishes on our question, and a resume built with the client's own buildResumeArray
answers it and runs the workflow to its output."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from tests.gates.gated import REFUND
from tests.integration.worker import require_postgres
from workflows.models import Decision, Invocation

from .server import asgi_server

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLIENT = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def npm_client() -> Path:
    """The client installed from package-lock.json (`npm ci`) unless it is already."""
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").exists():
        npm = shutil.which("npm")
        assert npm, "the AG-UI client test needs Node.js and npm on the PATH"
        subprocess.run([npm, "ci"], cwd=CLIENT, check=True, timeout=300)
    return CLIENT


def run_client(url: str, token: str, node_input: Any, answer: Any) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "the AG-UI client test needs Node.js on the PATH"
    done = subprocess.run(
        [node, "run_agent.mjs", url, token, json.dumps(node_input), json.dumps(answer)],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def person():
    require_postgres("uvicorn runs in a process of its own and must see the test database")

    def make(username: str, *groups: str) -> tuple[Any, str]:
        user = ApproverFactory(username=username)
        for name in groups:
            user.groups.add(Group.objects.get_or_create(name=name)[0])
        user = grant_answer(user, "answer_interrupt", "add_invocation")
        return user, Token.objects.create(user=user).key

    return make


def test_the_client_accepts_a_run_that_pauses_on_a_question_and_resumes(npm_client, person):
    amy, token = person("amy")
    node_input = {"request": {"message": "Approve?", "response_schema": APPROVAL}}
    with asgi_server() as server:
        seen = run_client(
            f"{server.base}/api/agui/{WORKFLOW}/", token, node_input, {"approved": True}
        )

    first, second = seen["first"], seen["second"]
    assert first["events"][0] == "RUN_STARTED"
    assert first["events"][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    assert "STEP_FINISHED" in first["events"]
    assert first["outcome"]["type"] == "interrupt"
    (question,) = seen["interrupts"]
    assert question["reason"] == "input_required"
    assert question["responseSchema"] == APPROVAL
    assert second["error"] is None
    assert second["events"][0] == "RUN_STARTED" and second["events"][-1] == "RUN_FINISHED"
    assert second["result"] == {"approved": True}
    assert Decision.objects.get().actor == amy
    assert str(Invocation.objects.get().session_id) == seen["threadId"]


def test_the_client_confirms_a_gate_with_its_action_fingerprint(npm_client, person):
    _, token = person("sue", "support")
    with asgi_server() as server:
        seen = run_client(
            f"{server.base}/api/agui/{REFUND}/",
            token,
            {"amount": 40, "customer": "ann"},
            {"decision": "approve"},
        )

    (gate,) = seen["interrupts"]
    assert gate["reason"] == "confirmation" and gate["toolCallId"] == gate["id"]
    assert len(gate["metadata"]["actionFingerprint"]) == 64
    assert seen["second"]["result"] == {"refunded": 40, "to": "ann"}
