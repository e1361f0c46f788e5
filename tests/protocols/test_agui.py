"""AG-UI 1.0 at `POST agui/{workflow}/` (DESIGN 4.5), in the test's own process: the event
stream of a run, its interrupt outcome, and `resume[]` answered through the services (one
transaction, replay a no-op, each refusal a RUN_ERROR naming it with nothing stored).
tests/protocols/test_agui_client.py runs the real @ag-ui/client against uvicorn."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from tests.asking import APPROVAL, WORKFLOW
from tests.factories import ApproverFactory, grant_answer
from tests.gates.gated import REFUND
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import AuditEntry, Decision, Interrupt, Invocation, NodeRun

from .agents import FAILS, PAIR, TOOL

pytestmark = pytest.mark.django_db(transaction=True)


def person(username: str, *groups: str) -> Any:
    user = ApproverFactory(username=username)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return grant_answer(user, "answer_interrupt", "add_invocation")


def events(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    text = b"".join(response.streaming_content).decode()
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


class Chat:
    """An AG-UI client on one thread, as a chat UI would drive it."""

    def __init__(self, user: Any, workflow: str) -> None:
        self.api = APIClient()
        self.api.force_authenticate(user)
        self.workflow = workflow
        self.thread = str(uuid.uuid4())

    def post(self, **fields: Any) -> Any:
        body = {
            "threadId": self.thread,
            "runId": str(uuid.uuid4()),
            "state": {},
            "messages": [],
            "tools": [],
            "context": [],
            "forwardedProps": {},
            **fields,
        }
        url = f"/api/agui/{self.workflow}/"
        return self.api.post(url, body, format="json", HTTP_ACCEPT="text/event-stream")

    def run(self, **fields: Any) -> list[dict[str, Any]]:
        return events(self.post(**fields))


def ask_input(**request: Any) -> dict[str, Any]:
    return {"request": {"message": "Approve?", "response_schema": APPROVAL, **request}}


def outcome(sent: list[dict[str, Any]]) -> dict[str, Any]:
    assert sent[-1]["type"] == "RUN_FINISHED", sent[-1]
    return sent[-1]["outcome"]


def stored() -> tuple[int, int, list[str]]:
    """What an answer writes: decisions, audit entries, the questions' statuses."""
    statuses = list(Interrupt.objects.order_by("pk").values_list("status", flat=True))
    return Decision.objects.count(), AuditEntry.objects.count(), statuses


def test_a_run_streams_its_steps_and_ends_on_the_question_the_caller_may_answer():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)

    sent = chat.run(forwardedProps=ask_input(assignees=["user:amy"], payload={"x": 1}))

    types = [e["type"] for e in sent]
    assert types[0] == "RUN_STARTED" and sent[0]["threadId"] == chat.thread
    assert types[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    steps = [(e["type"], e["stepName"]) for e in sent if e["type"].startswith("STEP_")]
    assert ("STEP_FINISHED", "hitl_test_ask@1/prepare@1") in steps
    assert steps[::2] == [("STEP_STARTED", name) for _, name in steps[1::2]]
    (question,) = outcome(sent)["interrupts"]
    interrupt = Interrupt.objects.get()
    assert question["id"] == interrupt.pk
    assert question["reason"] == "input_required"
    assert question["message"] == "Approve?"
    assert question["responseSchema"] == APPROVAL
    assert question["metadata"]["payload"] == {"x": 1}
    assert question["metadata"]["needs"] == []
    assert sent[-2]["snapshot"]["waiting_on_others"] == []
    assert str(interrupt.invocation.session_id) == chat.thread


def test_resume_answers_and_the_run_continues_to_its_output():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input()))["interrupts"]

    sent = chat.run(
        resume=[
            {"interruptId": question["id"], "status": "resolved", "payload": {"approved": True}}
        ]
    )

    assert sent[0]["type"] == "RUN_STARTED"
    assert outcome(sent)["type"] == "success"
    assert sent[-1]["result"] == {"approved": True}
    assert Invocation.objects.get().status == NodeStatus.COMPLETED
    finished = [e["stepName"] for e in sent if e["type"] == "STEP_FINISHED"]
    assert "hitl_test_ask@1/prepare@1" not in finished  # only what ran after the answer
    assert Decision.objects.get().actor == amy


def test_replaying_a_resume_changes_nothing():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input()))["interrupts"]
    resume = [{"interruptId": question["id"], "status": "resolved", "payload": {"approved": True}}]
    chat.run(resume=resume)
    before = stored()

    sent = chat.run(resume=resume)

    assert stored() == before
    assert outcome(sent)["type"] == "success"


def test_cancelled_leaves_the_question_open():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input()))["interrupts"]
    before = stored()

    sent = chat.run(resume=[{"interruptId": question["id"], "status": "cancelled"}])

    assert stored() == before
    assert [q["id"] for q in outcome(sent)["interrupts"]] == [question["id"]]


def refusal(sent: list[dict[str, Any]]) -> dict[str, Any]:
    assert [e["type"] for e in sent] == ["RUN_STARTED", "RUN_ERROR"], sent
    return sent[-1]


def test_resume_is_one_transaction_a_refused_entry_stores_nothing():
    amy = person("amy")
    chat = Chat(amy, PAIR)
    left, right = outcome(chat.run())["interrupts"]
    before = stored()

    error = refusal(
        chat.run(
            resume=[
                {"interruptId": left["id"], "status": "resolved", "payload": {"approved": True}},
                {"interruptId": right["id"], "status": "resolved", "payload": {"approved": "y"}},
            ]
        )
    )

    assert error["code"] == "invalid_response"
    assert right["id"] in error["message"]
    assert stored() == before


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"interruptId": "no-such-question"}, "unknown_interrupt"),
        ({"payload": {"approved": "yes"}}, "invalid_response"),
        ({"payload": {"approved": True, "extra": 1}}, "invalid_response"),
    ],
)
def test_a_refused_resume_is_a_run_error_naming_it(entry, code):
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input()))["interrupts"]
    before = stored()

    error = refusal(
        chat.run(
            resume=[{"interruptId": question["id"], "status": "resolved", "payload": None, **entry}]
        )
    )

    assert error["code"] == code
    assert (entry.get("interruptId") or question["id"]) in error["message"]
    assert stored() == before


def test_a_question_past_its_deadline_is_refused():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input(timeout=3600)))["interrupts"]
    assert question["expiresAt"] is not None
    Interrupt.objects.filter(pk=question["id"]).update(deadline=timezone.now() - timedelta(1))
    before = stored()

    error = refusal(
        chat.run(
            resume=[
                {"interruptId": question["id"], "status": "resolved", "payload": {"approved": True}}
            ]
        )
    )

    assert error["code"] == "interrupt_expired"
    assert stored() == before


def test_a_question_for_someone_else_waits_on_others_and_cannot_be_answered():
    person("bob")
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)

    sent = chat.run(forwardedProps=ask_input(assignees=["user:bob"], payload={"salary": 90}))

    assert outcome(sent)["type"] == "success"
    (waiting,) = sent[-2]["snapshot"]["waiting_on_others"]
    interrupt = Interrupt.objects.get()
    assert waiting == {
        "id": interrupt.pk,
        "kind": "input",
        "status": "pending",
        "answerable": False,
        "waiting_on_others": True,
    }
    assert "salary" not in json.dumps(sent)
    before = stored()
    error = refusal(
        chat.run(
            resume=[
                {"interruptId": interrupt.pk, "status": "resolved", "payload": {"approved": True}}
            ]
        )
    )
    assert error["code"] == "permission_denied"
    assert stored() == before
    assert interrupt.status == InterruptStatus.PENDING


def test_a_gate_asks_for_confirmation_bound_to_its_action():
    sue = person("sue", "support")
    chat = Chat(sue, REFUND)
    (gate,) = outcome(chat.run(forwardedProps={"amount": 40, "customer": "ann"}))["interrupts"]

    assert gate["reason"] == "confirmation"
    assert gate["toolCallId"] == gate["id"]
    fingerprint = gate["metadata"]["actionFingerprint"]
    assert len(fingerprint) == 64
    before = stored()
    approve = {"interruptId": gate["id"], "status": "resolved", "payload": {"decision": "approve"}}

    error = refusal(chat.run(resume=[{**approve, "metadata": {"actionFingerprint": "0" * 64}}]))
    assert error["code"] == "invalid_response" and "action_fingerprint" in error["message"]
    assert stored() == before

    sent = chat.run(resume=[{**approve, "metadata": {"actionFingerprint": fingerprint}}])
    assert sent[-1]["result"] == {"refunded": 40, "to": "ann"}


def test_a_failing_run_ends_with_run_error():
    amy = person("amy")

    sent = Chat(amy, FAILS).run()

    assert sent[-1]["type"] == "RUN_ERROR"
    assert "the tool is down" in sent[-1]["message"]


def test_bad_input_unknown_thread_and_unknown_workflow_are_named_errors():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)

    bad = chat.api.post(f"/api/agui/{WORKFLOW}/", {"threadId": "t"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_run_input"
    not_uuid = chat.post(threadId="thread-1")
    assert not_uuid.status_code == 400 and not_uuid.json()["error"] == "invalid_run_input"
    unknown = chat.post(resume=[{"interruptId": "x", "status": "resolved", "payload": {}}])
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_thread"
    chat.workflow = "no_such_workflow"
    assert chat.post().status_code == 404
    assert Invocation.objects.count() == 0


def test_someone_elses_thread_is_unknown():
    amy, eve = person("amy"), person("eve")
    chat = Chat(amy, WORKFLOW)
    outcome(chat.run(forwardedProps=ask_input()))
    intruder = Chat(eve, WORKFLOW)
    intruder.thread = chat.thread

    response = intruder.post(forwardedProps=ask_input())

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_thread"
    assert Invocation.objects.count() == 1


def test_a_signed_question_takes_the_passkey_assertion_in_metadata():
    from tests.passkeys.conftest import enrol, signature

    amy = person("amy")
    key = enrol(amy)[1]
    chat = Chat(amy, WORKFLOW)
    (question,) = outcome(chat.run(forwardedProps=ask_input(require_signature=True)))["interrupts"]
    assert question["metadata"]["needs"] == ["signature"]
    interrupt = Interrupt.objects.get(pk=question["id"])
    yes = {"approved": True}
    entry = {"interruptId": question["id"], "status": "resolved", "payload": yes}
    before = stored()

    unsigned = refusal(chat.run(resume=[entry]))
    assert unsigned["code"] == "signature_required"
    assert stored() == before

    signed = {"assertion": signature(key, interrupt, yes, "checked"), "comment": "checked"}
    sent = chat.run(resume=[{**entry, "metadata": signed}])
    assert outcome(sent)["type"] == "success"
    assert Decision.objects.get().comment == "checked"


def test_a_tool_call_is_answered_with_the_tools_result():
    amy = person("amy")
    chat = Chat(amy, TOOL)
    (call,) = outcome(chat.run())["interrupts"]

    assert call["reason"] == "tool_call"
    assert call["toolCallId"] == call["id"]
    assert call["metadata"]["payload"] == {"name": "lookup_order", "args": {"order": 7}}
    sent = chat.run(
        resume=[{"interruptId": call["id"], "status": "resolved", "payload": "shipped"}]
    )
    assert sent[-1]["result"] == {"found": "shipped"}


def test_a_node_seen_running_starts_its_step_and_no_step_outlives_the_run():
    amy = person("amy")
    chat = Chat(amy, WORKFLOW)
    chat.run(forwardedProps=ask_input())
    invocation = Invocation.objects.get()
    question = NodeRun.objects.get(invocation=invocation, path__endswith="/question@1")
    # What a worker commits when the node starts again (a rerun), seen by a following run.
    NodeRun.objects.filter(pk=question.pk).update(status=NodeStatus.RUNNING)

    sent = chat.run(runId=str(invocation.pk))

    steps = [(e["type"], e["stepName"]) for e in sent if e["type"].startswith("STEP_")]
    # Its first run's step (it asked), then this one: started as seen, finished at the end.
    assert steps.count(("STEP_STARTED", question.path)) == 2
    assert steps[-2:] == [("STEP_STARTED", question.path), ("STEP_FINISHED", question.path)]
    active: set[str] = set()  # what AG-UI's verifier checks: a step starts, then finishes
    for kind, name in steps:
        assert (name in active) == (kind == "STEP_FINISHED"), (kind, name)
        (active.discard if kind == "STEP_FINISHED" else active.add)(name)
    assert active == set()
    assert [e["type"] for e in sent][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
