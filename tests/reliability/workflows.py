"""Workflows of the reliability tests, registered in the test process (conftest.py) and in
the worker processes (settings.py).

Every node body appends what it does to a journal file named in the input (one JSON line
per entry, with the process id and the time), so a test sees each execution in every
process, including those of a worker it killed."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

from workflows.engine import DefaultResponse, RequestInput, Workflow, approval_gate, node
from workflows.registry import register

DECISION = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


def note(journal: str, node_name: str, what: str) -> None:
    """Append one entry to the journal (a single small O_APPEND write: atomic)."""
    entry = {"node": node_name, "what": what, "pid": os.getpid(), "at": time.time()}
    with open(journal, "a") as file:
        file.write(json.dumps(entry) + "\n")


def read_journal(journal: str) -> list[dict[str, Any]]:
    try:
        with open(journal) as file:
            return [json.loads(line) for line in file if line.strip()]
    except FileNotFoundError:
        return []


def body_runs(journal: str, node_name: str) -> list[tuple[int, float, float | None]]:
    """(pid, start, end) of each execution of a node's body; end None if it never ended."""
    runs: list[tuple[int, float, float | None]] = []
    for entry in read_journal(journal):
        if entry["node"] != node_name:
            continue
        if entry["what"] == "start":
            runs.append((entry["pid"], entry["at"], None))
        else:
            index = max(i for i, run in enumerate(runs) if run[0] == entry["pid"])
            runs[index] = (entry["pid"], runs[index][1], entry["at"])
    return runs


@node
def prepare(node_input: dict) -> dict:
    note(node_input["journal"], "prepare", "ran")
    return node_input


@node
def slow(node_input: dict) -> dict:
    note(node_input["journal"], "slow", "start")
    time.sleep(node_input["seconds"])
    note(node_input["journal"], "slow", "end")
    return node_input


@node
def finish(node_input: dict) -> dict:
    note(node_input["journal"], "finish", "ran")
    return {"slept": node_input["seconds"]}


@register
def slow_step() -> Workflow:
    """prepare -> slow (sleeps input["seconds"]) -> finish."""
    return Workflow(name="reliability_slow_step", edges=[("START", prepare, slow, finish)])


@node(name="approve")
def ask(node_input: dict) -> RequestInput:
    return RequestInput(message=f"Approve {node_input['what']}?", response_schema=DECISION)


@node
def record(node_input: dict) -> dict:
    return {"approved": node_input["approved"]}


@register
def approval() -> Workflow:
    """approve (one question) -> record."""
    return Workflow(name="reliability_approval", edges=[("START", ask, record)])


@node(name="review", parallel_worker=True)
def review(node_input: str) -> RequestInput:
    # Overdue from the start for a sweep run with a later `now`; until then a normal question.
    return RequestInput(
        message=f"Review {node_input}",
        payload={"item": node_input},
        response_schema=DECISION,
        timeout=timedelta(hours=1),
        on_timeout=DefaultResponse({"approved": False}),
    )


@register
def reviews() -> Workflow:
    """One question per item of the input list, all open at once, each with a deadline."""
    return Workflow(name="reliability_reviews", edges=[("START", review)])


def charge_card(journal: str, amount: int, seconds: float, idempotency_key: str) -> dict:
    """The side effect: the journal shows each call and the key it was given. The first
    call then takes `seconds` before it returns (the provider charged, its answer not yet
    back): the window a test kills its worker in, so the effect's result is never
    recorded."""
    first = not any(e["what"] == "charged" for e in read_journal(journal))
    entry = {"node": "charge", "what": "charged", "key": idempotency_key, "pid": os.getpid()}
    with open(journal, "a") as file:
        file.write(json.dumps({**entry, "at": time.time()}) + "\n")
    if first:
        time.sleep(seconds)
    return {"charged": amount}


@approval_gate(message="Charge {amount}?", remember=("always",))
@node(name="charge")
def charge(node_input: dict, ctx: Any) -> dict:
    """The gated node: its effect (killed inside the first call), then its result."""
    journal = node_input["journal"]
    return ctx.effect_sync(
        "card",
        charge_card,
        journal,
        node_input["amount"],
        node_input["seconds"],
        idempotent=node_input["idempotent"],
    )


@register
def gated_charge() -> Workflow:
    """charge (gated; its charge is an effect)."""
    return Workflow(name="reliability_gated_charge", edges=[("START", charge)])
