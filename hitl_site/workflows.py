"""Demo workflows: what the product does, in three cases.

- expense_approval: amounts up to APPROVAL_LIMIT are approved without asking anyone; larger
  ones ask a manager; amounts over LARGE_EXPENSE go to a nested workflow where a manager and
  finance (two approvals, quorum 2) decide in parallel, joined before the route to pay or
  reject. The managers' question is high priority above HIGH_PRIORITY_AMOUNT, due within
  MANAGER_DUE, and escalates when nobody answers: the managers are reminded, then the
  directors get it.
- content_moderation: a parallel worker asks a moderator about each post; each answer
  resumes just its item, and the result is published once every item is decided.
- document_drafting: a review loop; a rejection sends the reviewer's comment back to the
  draft node, which runs again with a fresh run_id. A document asked for `signed` needs
  the reviewer's signature (a passkey) on the decision.
- support_agent: an agent proposes tool calls for a support ticket, each behind an approval
  gate: a refund (edits allowed, remembered within limits), an e-mail to the customer that
  support may edit, a deletion of records that needs two approvers; a rejection's reason
  goes back to the planner, which proposes again.
"""

import hashlib
from datetime import timedelta
from typing import Any

from workflows.engine import (
    Context,
    Escalation,
    JoinNode,
    RequestInput,
    Workflow,
    approval_gate,
    node,
)
from workflows.registry import register

APPROVAL_LIMIT = 100.0  # at or under: approved without asking
LARGE_EXPENSE = 1000.0  # over: a manager and two finance approvers decide
HIGH_PRIORITY_AMOUNT = 500.0  # over: the managers' question is high priority
# Deadlines (shown counting down in the inbox); hitl_periodic or beat applies on_timeout.
MANAGER_DEADLINE = timedelta(days=3)
MODERATION_DEADLINE = timedelta(hours=8)
MANAGER_DUE = timedelta(hours=8)  # a target shown in the inbox, not a deadline

MANAGERS = "group:managers"
FINANCE = "group:finance"
MODERATORS = "group:moderators"
EDITORS = "group:editors"
DIRECTORS = "group:directors"

# When no manager answers: a reminder after 4 hours, the directors' after a day.
MANAGER_LADDER = [
    Escalation(after=timedelta(hours=4), remind=True),
    Escalation(after=timedelta(days=1), assignees=[DIRECTORS]),
]

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
        priority="high" if node_input["amount"] > HIGH_PRIORITY_AMOUNT else "normal",
        due=MANAGER_DUE,
        escalation=MANAGER_LADDER,
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
            require_signature=bool(node_input.get("signed")),
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


# --- support_agent ----------------------------------------------------------------------------
# An agent that works a support ticket by proposing tool calls (a scripted planner stands in
# for a model). Each tool is gated: support approves, edits or rejects the call; a rejection's
# reason goes back to the planner, which proposes again.

SUPPORT = "group:support"
MAX_AGENT_STEPS = 8
REFUND_ARGS = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "title": "Order", "maxLength": 40},
        "customer": {"type": "string", "title": "Customer", "maxLength": 100},
        "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 500},
    },
    "required": ["order", "customer", "amount"],
    "additionalProperties": False,
}
EMAIL_ARGS = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email", "title": "To"},
        "subject": {"type": "string", "title": "Subject", "maxLength": 200},
        "body": {"type": "string", "title": "Message"},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
}


def _reference(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()[:10]


def pay_back(order: str, amount: float, idempotency_key: str) -> dict:
    """Stands in for a payment provider's refund call: one refund per idempotency key."""
    return {"refund_id": f"rf-{_reference(idempotency_key)}", "amount": amount}


def send_mail(to: str, subject: str, body: str, idempotency_key: str) -> dict:
    """Stands in for a mail service: the key is the message id, so a resend is a no-op."""
    return {"message_id": f"<{_reference(idempotency_key)}@support.example>"}


def erase(record: str) -> dict:
    return {"erased": record}


@approval_gate(
    message="Refund {amount} to {customer} for order {order}?",
    args_schema=REFUND_ARGS,
    assignees=[SUPPORT],
    allow_edit=True,
    remember=("invocation", "session", "always"),
)
@node(name="refund")
async def refund(ctx: Context, node_input: dict) -> dict:
    paid = await ctx.effect(
        "payment", pay_back, node_input["order"], node_input["amount"], idempotent=True
    )
    return {"refunded": node_input["amount"], **paid}


@approval_gate(
    message="Send “{subject}” to {to}?",
    args_schema=EMAIL_ARGS,
    assignees=[SUPPORT],
    allow_edit=True,
)
@node(name="email_customer")
async def email_customer(ctx: Context, node_input: dict) -> dict:
    return await ctx.effect("mail", send_mail, **node_input, idempotent=True)


@approval_gate(message="Delete the records of {record}? ({why})", assignees=[MANAGERS], quorum=2)
@node(name="delete_records")
async def delete_records(ctx: Context, node_input: dict) -> dict:
    return await ctx.effect("erase", erase, node_input["record"])  # asks if in doubt


def propose(ticket: dict, history: list[dict]) -> dict | None:
    """The scripted planner: the next tool call for the ticket, given what happened so far
    (a rejected call's reason included), or None when the ticket is done."""
    done = {step["tool"] for step in history if not step["result"].get("rejected")}
    last = history[-1] if history else None
    customer = ticket["customer"]
    if ticket["issue"] == "damaged" and "refund" not in done:
        amount = ticket["amount"]
        if last and last["tool"] == "refund":  # rejected: a number in the reason, or half
            reason = last["result"]["reason"]
            numbers = [int(word) for word in reason.replace("$", " ").split() if word.isdigit()]
            amount = numbers[0] if numbers else last["args"]["amount"] / 2
        return {
            "tool": "refund",
            "args": {"order": ticket["order"], "customer": customer, "amount": amount},
        }
    if ticket["issue"] == "close_account" and not any(
        s["tool"] == "delete_records" for s in history
    ):
        why = f"customer asked to close the account in ticket {ticket['id']}"
        return {"tool": "delete_records", "args": {"record": customer, "why": why}}
    if "email_customer" not in done:
        body = _reply(ticket, history)
        if last and last["tool"] == "email_customer":
            body += f"\n\n(Revised: {last['result']['reason']})"
        subject = f"About your ticket {ticket['id']}"
        return {
            "tool": "email_customer",
            "args": {"to": ticket["email"], "subject": subject, "body": body},
        }
    return None


def _reply(ticket: dict, history: list[dict]) -> str:
    outcomes = {step["tool"]: step["result"] for step in history}
    if "refunded" in outcomes.get("refund", {}):
        return f"We refunded {outcomes['refund']['refunded']} for order {ticket['order']}."
    deleted = outcomes.get("delete_records", {})
    if deleted.get("rejected"):
        return f"We could not close your account yet: {deleted['reason']}"
    if deleted:
        return "Your account is closed and its records are deleted."
    return "Thank you for your message; we are looking into it."


TOOLS = {"refund": refund, "email_customer": email_customer, "delete_records": delete_records}


@node(name="agent", rerun_on_resume=True, runs=TOOLS.values())
async def agent(ctx: Context, node_input: dict) -> Any:
    """Works the ticket one tool call at a time. A call waiting for a person makes the agent
    wait; when it is answered the agent runs again and earlier calls return what they did."""
    history: list[dict] = []
    for _ in range(MAX_AGENT_STEPS):
        call = propose(node_input, history)
        if call is None:
            return {"ticket": node_input["id"], "steps": history}
        result = await ctx.run_node(TOOLS[call["tool"]], call["args"])
        if result is None:
            return None
        history.append({**call, "result": result})
    raise RuntimeError(f"ticket {node_input['id']}: no end after {MAX_AGENT_STEPS} tool calls")


@register
def support_agent() -> Workflow:
    return Workflow(name="support_agent", edges=[("START", agent)])
