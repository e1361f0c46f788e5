"""Gated workflows for the Django-level tests of approval gates, grants and effects.

- hitl_test_refund: a refund (gated: support answers, edits allowed, remembered in any
  scope) whose rejection goes to a revising step that proposes a smaller amount.
- hitl_test_delete: a record deletion that needs two approvers, not the starter.
- hitl_test_timed: a gate that rejects at its deadline.
- hitl_test_charge: a gated charge performed as an effect (`ctx.effect_sync`).
- hitl_test_transfer: a transfer two of support approve, remembered in any scope.
- hitl_test_mail: a mail whose address an approver may edit (args_schema: format email).
"""

from datetime import timedelta
from typing import Any

from workflows.engine import Workflow, approval_gate, node
from workflows.engine.status import InterruptStatus
from workflows.models import Interrupt
from workflows.registry import registry

REFUND = "hitl_test_refund"
DELETE = "hitl_test_delete"
TIMED = "hitl_test_timed"
CHARGE = "hitl_test_charge"
TRANSFER = "hitl_test_transfer"
MAIL = "hitl_test_mail"
CHARGES: list[tuple[int, str]] = []  # (amount, idempotency key) of every call

REFUND_ARGS = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": 0, "title": "Amount"},
        "customer": {"type": "string", "title": "Customer"},
    },
    "required": ["amount", "customer"],
    "additionalProperties": False,
}


@approval_gate(
    message="Refund {amount} to {customer}?",
    args_schema=REFUND_ARGS,
    assignees=["group:support"],
    allow_edit=True,
    remember=("invocation", "session", "always"),
)
@node(name="refund")
def refund(node_input: dict, ctx: Any) -> dict:
    ctx.route = "refunded"
    return {"refunded": node_input["amount"], "to": node_input["customer"]}


@node
def revise(node_input: dict) -> dict:
    """Proposes again after a rejection (whatever the reason: a smaller amount)."""
    return {"amount": 10, "customer": "ann"}


@node
def refunded(node_input: dict) -> dict:
    return node_input


@approval_gate(message="Delete record {record}?", quorum=2, four_eyes=True)
@node(name="delete_record")
def delete_record(node_input: dict) -> dict:
    return {"deleted": node_input["record"]}


@approval_gate(message="Go?", timeout=timedelta(seconds=1), on_timeout="reject")
@node(name="go")
def go(node_input: Any) -> Any:
    return {"went": node_input}


def bank_charge(amount: int, idempotency_key: str) -> dict:
    CHARGES.append((amount, idempotency_key))
    return {"charged": amount, "receipt": f"r-{len(CHARGES)}"}


@approval_gate(message="Charge {amount}?", remember=("always",))
@node(name="charge")
def charge(node_input: dict, ctx: Any) -> dict:
    return ctx.effect_sync("bank", bank_charge, node_input["amount"])


@approval_gate(
    message="Transfer {amount}?",
    assignees=["group:support"],
    quorum=2,
    remember=("invocation", "session", "always"),
)
@node(name="transfer")
def transfer(node_input: dict) -> dict:
    return {"transferred": node_input["amount"]}


MAIL_ARGS = {
    "type": "object",
    "properties": {"to": {"type": "string", "format": "email", "title": "To"}},
    "required": ["to"],
}


@approval_gate(message="Mail {to}?", args_schema=MAIL_ARGS, allow_edit=True)
@node(name="mail")
def mail(node_input: dict) -> dict:
    return {"mailed": node_input["to"]}


WORKFLOWS = [
    Workflow(
        name=REFUND,
        edges=[("START", refund, {"rejected": revise, "refunded": refunded}), (revise, refund)],
    ),
    Workflow(name=DELETE, edges=[("START", delete_record)]),
    Workflow(name=TIMED, edges=[("START", go)]),
    Workflow(name=CHARGE, edges=[("START", charge)]),
    Workflow(name=TRANSFER, edges=[("START", transfer)]),
    Workflow(name=MAIL, edges=[("START", mail)]),
]
for workflow in WORKFLOWS:
    if workflow.name not in {d.name for d in registry.definitions()}:
        registry.register(workflow)


def pending(invocation: Any) -> Interrupt:
    """The question an invocation of these workflows waits on."""
    return Interrupt.objects.get(invocation=invocation, status=InterruptStatus.PENDING)
