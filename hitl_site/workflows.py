"""Demo workflows: what the product does, in three cases.

- expense_approval: amounts up to APPROVAL_LIMIT are approved without asking anyone; larger
  ones ask a manager; amounts over LARGE_EXPENSE go to a nested workflow where a manager and
  finance (two approvals, quorum 2) decide in parallel, joined before the route to pay or
  reject.
- content_moderation: a parallel worker asks a moderator about each post; each answer
  resumes just its item, and the result is published once every item is decided.
- document_drafting: a review loop; a rejection sends the reviewer's comment back to the
  draft node, which runs again with a fresh run_id.
"""

from datetime import timedelta
from typing import Any

from workflows.engine import Context, JoinNode, RequestInput, Workflow, node
from workflows.registry import register

APPROVAL_LIMIT = 100.0  # at or under: approved without asking
LARGE_EXPENSE = 1000.0  # over: a manager and two finance approvers decide
# Deadlines (shown counting down in the inbox); hitl_periodic or beat applies on_timeout.
MANAGER_DEADLINE = timedelta(days=3)
MODERATION_DEADLINE = timedelta(hours=8)

MANAGERS = "group:managers"
FINANCE = "group:finance"
MODERATORS = "group:moderators"
EDITORS = "group:editors"

DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve?"},
        "comment": {"type": "string", "title": "Comment"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}

# With a quorum the approval service adds a `decisions` list to the answer: allow it.
QUORUM_DECISION_SCHEMA = {k: v for k, v in DECISION_SCHEMA.items() if k != "additionalProperties"}

MODERATION_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["publish", "remove"], "title": "Decision"},
        "reason": {"type": "string", "title": "Reason", "description": "Shown to the author."},
    },
    "required": ["decision"],
    "additionalProperties": False,
}


def answer(ctx: Context) -> Any:
    """The answer a re-run node received, or None on its first run."""
    return next(iter(ctx.resume_inputs.values()), None)


# --- expense_approval -----------------------------------------------------------------------


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
    return {"approved": True, "comment": f"{node_input['amount']:.2f} needs no approval"}


@node(name="manager_approval")
def ask_manager(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Approve an expense of {node_input['amount']:.2f} "
        f"for {node_input.get('employee', 'an employee')}?",
        payload=node_input,
        response_schema=DECISION_SCHEMA,
        assignees=[MANAGERS],
        timeout=MANAGER_DEADLINE,
        on_timeout={"approved": False, "comment": "no manager answered within 3 days"},
    )


@node(name="finance_approval")
def ask_finance(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Finance: approve a large expense of {node_input['amount']:.2f} "
        f"for {node_input.get('employee', 'an employee')}? (two approvals needed)",
        payload=node_input,
        response_schema=QUORUM_DECISION_SCHEMA,
        assignees=[FINANCE],
        quorum=2,
    )


@node
def combine(node_input: dict) -> dict:
    """Both sides must approve; the comments of both are kept."""
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
def expense_approval() -> Workflow:
    both = JoinNode(name="both_approved")
    large_expense = Workflow(
        name="large_expense",
        edges=[
            ("START", ask_manager, both),
            ("START", ask_finance, both),
            (both, combine),
        ],
    )
    return Workflow(
        name="expense_approval",
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


# --- content_moderation ---------------------------------------------------------------------


@node
def split_posts(node_input: dict) -> list[dict]:
    return [{"post": index + 1, "text": text} for index, text in enumerate(node_input["posts"])]


@node(name="review_post", parallel_worker=True, rerun_on_resume=True)
def review_post(ctx: Context, node_input: dict) -> Any:
    decision = answer(ctx)
    if decision is None:
        return RequestInput(
            message=f"Publish post {node_input['post']}? “{node_input['text'][:80]}”",
            payload=node_input,
            response_schema=MODERATION_SCHEMA,
            assignees=[MODERATORS],
            timeout=MODERATION_DEADLINE,
            on_timeout={"decision": "remove", "reason": "not reviewed within 8 hours"},
        )
    return {**node_input, **decision}


@node
def publish_posts(node_input: list[dict]) -> dict:
    return {
        "published": [item["post"] for item in node_input if item["decision"] == "publish"],
        "removed": [item["post"] for item in node_input if item["decision"] == "remove"],
    }


@register
def content_moderation() -> Workflow:
    return Workflow(
        name="content_moderation",
        edges=[("START", split_posts, review_post, publish_posts)],
    )


# --- document_drafting ----------------------------------------------------------------------


@node
def draft(node_input: dict) -> dict:
    """Write the next version; after a rejection, `node_input` carries the comment."""
    version = node_input.get("version", 0) + 1
    text = f"{node_input['title']} (version {version}): {node_input.get('brief', '')}"
    if node_input.get("feedback"):
        text += f" Revised for: {node_input['feedback']}"
    return {**node_input, "version": version, "text": text}


@node(rerun_on_resume=True)
def review(ctx: Context, node_input: dict) -> Any:
    verdict = answer(ctx)
    if verdict is None:
        return RequestInput(
            message=f"Review version {node_input['version']} of “{node_input['title']}”",
            payload={"version": node_input["version"], "text": node_input["text"]},
            response_schema=DECISION_SCHEMA,
            assignees=[EDITORS],
        )
    ctx.route = "publish" if verdict["approved"] else "revise"
    return {**node_input, "feedback": verdict.get("comment", "")}


@node
def publish(node_input: dict) -> dict:
    return {"status": "published", "version": node_input["version"], "text": node_input["text"]}


@register
def document_drafting() -> Workflow:
    return Workflow(
        name="document_drafting",
        edges=[("START", draft, review, {"publish": publish, "revise": draft})],
    )
