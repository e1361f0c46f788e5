"""Workflows of the protocol tests (registered in the test process on import, and in the
uvicorn processes through tests/protocols/server_settings.py).

- hitl_test_pair: two questions at once (left and right reviews), joined.
- hitl_test_fails: a node that raises.
- hitl_test_tool: a long-running tool call (a FunctionCall whose id is new each run),
  answered with the tool's result.
The asking workflow (tests/asking.py) and the gated ones (tests/gates/gated.py) register
on import too.
"""

from typing import Any

import tests.gates.gated  # noqa: F401  (registers the gated workflows)
from tests.asking import APPROVAL
from workflows.engine import Event, FunctionCall, JoinNode, RequestInput, Workflow, node
from workflows.registry import registry

PAIR = "hitl_test_pair"
FAILS = "hitl_test_fails"
TOOL = "hitl_test_tool"


def reviewer(side: str) -> Any:
    @node(name=f"{side}_review")
    def review(node_input: Any) -> RequestInput:
        return RequestInput(message=f"{side} review", response_schema=APPROVAL)

    return review


@node
def summary(node_input: dict) -> dict:
    return {"approved": all(answer["approved"] for answer in node_input.values())}


@node
def broken(node_input: Any) -> Any:
    raise RuntimeError("the tool is down")


@node
def lookup(ctx: Any, node_input: Any) -> Any:
    call_id = f"lookup-{ctx.invocation_id}"
    yield Event(
        function_calls=[FunctionCall(call_id, "lookup_order", {"order": 7})],
        long_running_tool_ids=[call_id],
    )


@node
def looked_up(node_input: Any) -> Any:
    return {"found": node_input}


if PAIR not in {d.name for d in registry.definitions()}:
    join = JoinNode(name="both")
    registry.register(
        Workflow(
            name=PAIR,
            edges=[
                ("START", reviewer("left"), join),
                ("START", reviewer("right"), join),
                (join, summary),
            ],
        )
    )
    registry.register(Workflow(name=FAILS, edges=[("START", broken)]))
    registry.register(Workflow(name=TOOL, edges=[("START", lookup, looked_up)]))
