"""A workflow that asks whatever its input says, for the tests of who answers (DESIGN 4.1).

`ask(request={...}, user=...)` starts it and returns the pending Interrupt; the request
dict holds RequestInput's keyword arguments (message, payload, response_schema, assignees,
quorum, four_eyes, priority, due, escalation as Escalation steps, ...). The workflow's
output is the answer it got.
"""

from datetime import timedelta
from typing import Any

from workflows import services
from workflows.engine import Escalation, RequestInput, Workflow, node
from workflows.models import Interrupt
from workflows.registry import registry

WORKFLOW = "hitl_test_ask"

APPROVAL = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approved"},
        "comment": {"type": "string", "title": "Comment"},
        "decisions": {"type": "array"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}


@node
def prepare(node_input: dict) -> dict:
    return {**node_input, "prepared": True}


@node(name="question")
def question(node_input: dict) -> RequestInput:
    request = dict(node_input["request"])
    for delay in ("timeout", "due"):
        if request.get(delay) is not None:
            request[delay] = timedelta(seconds=request[delay])
    request["escalation"] = [Escalation.from_dict(s) for s in request.get("escalation", [])]
    return RequestInput(**request)


@node
def answered(node_input: Any) -> Any:
    return node_input


if WORKFLOW not in {d.name for d in registry.definitions()}:
    registry.register(Workflow(name=WORKFLOW, edges=[("START", prepare, question, answered)]))


def ask(user: Any = None, **request: Any) -> Interrupt:
    """Start the asking workflow; return its pending interrupt."""
    request.setdefault("message", "Approve?")
    request.setdefault("response_schema", APPROVAL)
    for delay in ("timeout", "due"):  # the input travels as JSON
        if isinstance(request.get(delay), timedelta):
            request[delay] = request[delay].total_seconds()
    request["escalation"] = [
        s.to_dict() if isinstance(s, Escalation) else s for s in request.get("escalation", [])
    ]
    invocation = services.start(WORKFLOW, {"request": request}, user=user)
    return Interrupt.objects.select_related("invocation").get(invocation=invocation)
