"""The test project's workflows: one of each shape the library tests exercise.

- test_expense: routes (auto / manager / large), a nested workflow whose two questions run
  in parallel (one with a quorum of 2) and meet at a join, then a route to pay or reject.
- test_moderation: a parallel worker asks about each item; each answer resumes its item.
- test_drafting: a review loop; a rejection sends the comment back to the draft node.
"""

from typing import Any

from workflows.engine import Context, JoinNode, RequestInput, Workflow, node
from workflows.registry import register

APPROVAL_LIMIT = 100.0  # at or under: approved without asking
LARGE_EXPENSE = 1000.0  # over: a manager and two finance approvers decide

DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve?"},
        "comment": {"type": "string", "title": "Comment"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
# With a quorum the approval service adds a `decisions` list to the answer.
QUORUM_DECISION_SCHEMA = {k: v for k, v in DECISION_SCHEMA.items() if k != "additionalProperties"}
MODERATION_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["publish", "remove"]},
        "reason": {"type": "string"},
    },
    "required": ["decision"],
    "additionalProperties": False,
}


def answer(ctx: Context) -> Any:
    """The answer a re-run node received, or None on its first run."""
    return next(iter(ctx.resume_inputs.values()), None)


# --- test_expense -----------------------------------------------------------------------------


@node
def prepare(ctx: Context, node_input: dict) -> dict:
    amount = float(node_input.get("amount", 0))
    if amount <= APPROVAL_LIMIT:
        ctx.route = "auto"
    elif amount > LARGE_EXPENSE:
        ctx.route = "large"
    else:
        ctx.route = "manager"
    return {**node_input, "amount": amount, "needs_manager": amount > APPROVAL_LIMIT}


@node
def auto_approve(node_input: dict) -> dict:
    return {"approved": True, "comment": "under the limit"}


@node(name="manager_approval")
def ask_manager(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Approve an expense of {node_input['amount']:.2f} for {node_input['employee']}?",
        payload=node_input,
        response_schema=DECISION_SCHEMA,
        assignees=["group:managers"],
    )


@node(name="finance_approval")
def ask_finance(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Finance: approve a large expense of {node_input['amount']:.2f} "
        f"for {node_input['employee']}?",
        payload=node_input,
        response_schema=QUORUM_DECISION_SCHEMA,
        assignees=["group:finance"],
        quorum=2,
    )


@node
def combine(node_input: dict) -> dict:
    comments = [f"{side}: {a['comment']}" for side, a in node_input.items() if a.get("comment")]
    return {
        "approved": all(a["approved"] for a in node_input.values()),
        "comment": "; ".join(comments),
    }


@node
def decide(ctx: Context, node_input: dict) -> dict:
    ctx.route = "approve" if node_input["approved"] else "reject"
    return node_input


@node
def reimburse(ctx: Context) -> dict:
    return {"status": "reimbursed", "reference": ctx.idempotency_key}


@node
def notify_rejection(node_input: dict) -> dict:
    return {"status": "rejected", "comment": node_input.get("comment", "")}


@register
def expense_workflow() -> Workflow:
    both = JoinNode(name="both_approved")
    large_expense = Workflow(
        name="large_expense",
        edges=[("START", ask_manager, both), ("START", ask_finance, both), (both, combine)],
    )
    return Workflow(
        name="test_expense",
        edges=[
            (
                "START",
                prepare,
                {"auto": auto_approve, "manager": ask_manager, "large": large_expense},
            ),
            (auto_approve, decide),
            (ask_manager, decide),
            (large_expense, decide),
            (decide, {"approve": reimburse, "reject": notify_rejection}),
        ],
    )


# --- test_moderation --------------------------------------------------------------------------


@node
def split_posts(node_input: dict) -> list[dict]:
    return [{"post": index + 1, "text": text} for index, text in enumerate(node_input["posts"])]


@node(name="review_post", parallel_worker=True, rerun_on_resume=True)
def review_post(ctx: Context, node_input: dict) -> Any:
    decision = answer(ctx)
    if decision is None:
        return RequestInput(
            message=f"Publish post {node_input['post']}? {node_input['text']}",
            payload=node_input,
            response_schema=MODERATION_SCHEMA,
            assignees=["group:moderators"],
        )
    return {**node_input, **decision}


@node
def publish_posts(node_input: list[dict]) -> dict:
    return {
        "published": [item["post"] for item in node_input if item["decision"] == "publish"],
        "removed": [item["post"] for item in node_input if item["decision"] == "remove"],
    }


@register
def moderation_workflow() -> Workflow:
    return Workflow(
        name="test_moderation", edges=[("START", split_posts, review_post, publish_posts)]
    )


# --- test_drafting ----------------------------------------------------------------------------


@node
def draft(node_input: dict) -> dict:
    version = node_input.get("version", 0) + 1
    return {**node_input, "version": version, "text": f"{node_input['title']} v{version}"}


@node(rerun_on_resume=True)
def review(ctx: Context, node_input: dict) -> Any:
    verdict = answer(ctx)
    if verdict is None:
        return RequestInput(
            message=f"Review version {node_input['version']}",
            payload={"version": node_input["version"], "text": node_input["text"]},
            response_schema=DECISION_SCHEMA,
            assignees=["group:editors"],
        )
    ctx.route = "publish" if verdict["approved"] else "revise"
    return {**node_input, "feedback": verdict.get("comment", "")}


@node
def publish(node_input: dict) -> dict:
    return {"status": "published", "version": node_input["version"]}


@register
def drafting_workflow() -> Workflow:
    return Workflow(
        name="test_drafting",
        edges=[("START", draft, review, {"publish": publish, "revise": draft})],
    )
