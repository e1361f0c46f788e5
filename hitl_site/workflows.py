"""Demo workflows: an expense approval with a manager decision, and a two-reviewer
document sign-off whose reviewers answer in parallel."""

from workflows.engine import JoinNode, RequestInput, Workflow, node
from workflows.registry import register

DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "comment": {"type": "string"},
    },
    "required": ["approved"],
    "additionalProperties": False,
}


@node
def prepare(node_input: dict) -> dict:
    amount = float(node_input.get("amount", 0))
    return {**node_input, "amount": amount, "needs_manager": amount > 100}


@node(name="manager_approval")
def ask_manager(node_input: dict) -> RequestInput:
    return RequestInput(
        message=f"Approve an expense of {node_input['amount']:.2f} "
        f"for {node_input.get('employee', 'an employee')}?",
        payload=node_input,
        response_schema=DECISION_SCHEMA,
    )


@node
def decide(ctx, node_input: dict) -> dict:
    ctx.route = "approve" if node_input["approved"] else "reject"
    return node_input


@node
def reimburse(ctx) -> dict:
    return {"status": "reimbursed", "reference": ctx.idempotency_key}


@node
def notify_rejection(node_input: dict) -> dict:
    return {"status": "rejected", "comment": node_input.get("comment", "")}


@register
def expense_approval() -> Workflow:
    return Workflow(
        name="expense_approval",
        edges=[
            (
                "START",
                prepare,
                ask_manager,
                decide,
                {"approve": reimburse, "reject": notify_rejection},
            ),
        ],
    )


def reviewer(role: str):
    @node(name=f"{role}_review")
    def review(node_input: dict) -> RequestInput:
        return RequestInput(
            message=f"{role.title()} review of {node_input.get('title', 'the document')}",
            payload={"title": node_input.get("title"), "role": role},
            response_schema=DECISION_SCHEMA,
        )

    return review


@node
def summarize(node_input: dict) -> dict:
    approved = all(decision["approved"] for decision in node_input.values())
    return {"approved": approved, "decisions": node_input}


@register
def document_signoff() -> Workflow:
    join = JoinNode(name="both_reviews")
    return Workflow(
        name="document_signoff",
        edges=[
            ("START", reviewer("legal"), join),
            ("START", reviewer("finance"), join),
            (join, summarize),
        ],
    )
