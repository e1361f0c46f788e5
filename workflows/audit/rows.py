"""What people see, checked against the entries that recorded it: the rows the admin, the
API and the receipts show (a Decision, an Interrupt's status, answer and who answered, a
Grant, a Delegation, an Invocation's start and cancellation) must say what the trail
says. The chain protects the entries; this is what makes an edit of the rows shown
beside them found too. Every row that disagrees is named.

Values are compared in canonical form (RFC 8785), so JSON a database rewrote is equal to
what was recorded; times are compared as instants.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..engine.status import InterruptStatus, NodeStatus
from ..models import AuditEntry, Decision, Delegation, Grant, Interrupt, Invocation
from . import actions
from .canonical import canonical_json, sha256_hex

ROW_ACTIONS = (
    actions.INVOCATION_STARTED,
    actions.INVOCATION_CANCELLED,
    actions.INVOCATION_RETRIED,
    actions.DECISION_RECORDED,
    actions.ANSWER_ACCEPTED,
    actions.ANSWER_REWOUND,
    actions.INTERRUPT_REOPENED,
    actions.INTERRUPT_SUPERSEDED,
    actions.INTERRUPT_EXPIRED,
    actions.GRANT_CREATED,
    actions.GRANT_USED,
    actions.GRANT_REVOKED,
    actions.DELEGATION_CREATED,
    actions.DELEGATION_ENDED,
)
# The entries that set a question's answer, latest first: accepted, changed (DESIGN 3.8),
# reopened for a new round, superseded.
ANSWERING = (
    actions.ANSWER_ACCEPTED,
    actions.ANSWER_REWOUND,
    actions.INTERRUPT_REOPENED,
    actions.INTERRUPT_SUPERSEDED,
)
ENTRY_COLUMNS = ("id", "invocation_id", "interrupt_id", "action", "actor_id", "on_behalf_of_id")


@dataclass(frozen=True)
class RowProblem:
    """A row that does not say what its entry recorded (or that no entry records)."""

    row: str
    reason: str
    entry_id: int | None = None

    def __str__(self) -> str:
        return f"{self.row}: {self.reason}"


def same(first: Any, second: Any) -> bool:
    """Whether two JSON values are one value (40 and 40.0, keys in any order)."""
    try:
        return canonical_json(first) == canonical_json(second)
    except ValueError:
        return bool(first == second)


def _instant(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


@dataclass
class _Recorded:
    """The entries that record row changes, by the row they concern."""

    decisions: dict[Any, AuditEntry] = field(default_factory=dict)
    answers: dict[str, AuditEntry] = field(default_factory=dict)
    expiries: dict[str, AuditEntry] = field(default_factory=dict)
    cancellations: dict[str, AuditEntry] = field(default_factory=dict)
    started: dict[str, AuditEntry] = field(default_factory=dict)
    control: dict[str, AuditEntry] = field(default_factory=dict)  # the last cancel/retry
    grants: dict[str, AuditEntry] = field(default_factory=dict)
    grant_uses: Counter[str] = field(default_factory=Counter)
    revocations: dict[str, AuditEntry] = field(default_factory=dict)
    delegations: dict[Any, AuditEntry] = field(default_factory=dict)
    delegation_ends: dict[Any, AuditEntry] = field(default_factory=dict)

    def add(self, entry: AuditEntry) -> None:
        data = entry.data if isinstance(entry.data, Mapping) else {}
        action, invocation = entry.action, str(entry.invocation_id)
        if action == actions.DECISION_RECORDED:
            if data.get("decision") is not None:  # (services.decide always names it)
                self.decisions[data["decision"]] = entry
        elif action in ANSWERING:  # the last of them says what the question shows
            self.answers[str(entry.interrupt_id)] = entry
        elif action == actions.INTERRUPT_EXPIRED:
            self.expiries[str(entry.interrupt_id)] = entry
        elif action == actions.INVOCATION_STARTED:
            self.started[invocation] = entry
        elif action in (actions.INVOCATION_CANCELLED, actions.INVOCATION_RETRIED):
            self.control[invocation] = entry
            if action == actions.INVOCATION_CANCELLED:
                for interrupt_id in data.get("cancelled_interrupts") or []:
                    self.cancellations[str(interrupt_id)] = entry
        elif action == actions.GRANT_CREATED:
            self.grants[str(data.get("grant"))] = entry
        elif action == actions.GRANT_USED:
            self.grant_uses[str(data.get("grant"))] += 1
        elif action == actions.GRANT_REVOKED:
            self.revocations[str(data.get("grant"))] = entry
        elif action == actions.DELEGATION_CREATED:
            self.delegations[data.get("delegation")] = entry
        elif action == actions.DELEGATION_ENDED:
            self.delegation_ends[data.get("delegation")] = entry


def _differences(
    row: str, entry: AuditEntry, pairs: Iterable[tuple[str, Any, Any]]
) -> Iterator[RowProblem]:
    for what, shown, recorded in pairs:
        equal = shown == recorded if isinstance(shown, datetime | None) else same(shown, recorded)
        if not equal:
            yield RowProblem(
                row,
                f"its {what} is {shown!r}, but entry {entry.id} ({entry.action}) recorded "
                f"{recorded!r}",
                entry.id,
            )


def _decisions(recorded: _Recorded, rows: Iterable[Decision]) -> Iterator[RowProblem]:
    unseen = dict(recorded.decisions)
    for decision in rows:
        name = f"decision {decision.pk} on question {decision.interrupt_id!r}"
        entry = unseen.pop(decision.pk, None)
        if entry is None:
            yield RowProblem(name, "no decision.recorded entry records it")
            continue
        data = entry.data
        yield from _differences(
            name,
            entry,
            [
                ("question", decision.interrupt_id, entry.interrupt_id),
                ("actor", decision.actor_id, entry.actor_id),
                ("on_behalf_of", decision.on_behalf_of_id, entry.on_behalf_of_id),
                ("response", decision.response, data.get("response")),
                ("comment", decision.comment, data.get("comment", "")),
            ],
        )
    for decision_id, entry in unseen.items():
        yield RowProblem(f"decision {decision_id}", "recorded, but its row is gone", entry.id)


def _expected_answer(
    recorded: _Recorded, interrupt: Interrupt
) -> tuple[str, Any, Any, AuditEntry | None]:
    """The status, answer and answerer the entries give a question."""
    interrupt_id = interrupt.pk
    if entry := recorded.answers.get(interrupt_id):
        data = entry.data
        if entry.action == actions.INTERRUPT_REOPENED:
            return InterruptStatus.PENDING, data.get("answer"), None, entry
        if entry.action == actions.INTERRUPT_SUPERSEDED:
            if interrupt.round > data.get("round", 1):  # asked again since: a new question
                return InterruptStatus.PENDING, None, None, None
            return InterruptStatus.SUPERSEDED, data.get("response"), data.get("answerer"), entry
        return InterruptStatus.RESOLVED, data.get("response"), entry.actor_id, entry
    if entry := recorded.expiries.get(interrupt_id):
        return InterruptStatus.EXPIRED, entry.data.get("response"), None, entry
    if entry := recorded.cancellations.get(interrupt_id):
        return InterruptStatus.CANCELLED, None, entry.actor_id, entry
    return InterruptStatus.PENDING, None, None, None


def _interrupts(recorded: _Recorded, rows: Iterable[Interrupt]) -> Iterator[RowProblem]:
    for interrupt in rows:
        name = f"question {interrupt.pk!r}"
        status, answer, answerer, entry = _expected_answer(recorded, interrupt)
        if interrupt.status != status:
            why = (
                f"entry {entry.id} ({entry.action})"
                if entry
                else "no entry answers, expires or cancels it"
            )
            yield RowProblem(
                name,
                f"its status is {interrupt.status!r}, but {why} makes it {status!r}",
                entry.id if entry else None,
            )
            continue
        if entry is not None:
            yield from _differences(
                name,
                entry,
                [
                    ("answer", interrupt.response, answer),
                    ("answerer", interrupt.resolved_by_id, answerer),
                ],
            )
        elif interrupt.response is not None or interrupt.resolved_by_id is not None:
            yield RowProblem(name, "it shows an answer or an answerer no entry records")


def _invocations(recorded: _Recorded, rows: Iterable[Invocation]) -> Iterator[RowProblem]:
    for invocation in rows:
        key, name = str(invocation.pk), f"invocation {invocation.pk}"
        started = recorded.started.get(key)
        if started is None:
            if invocation.audit_head:  # (one from before the trail has no entry at all)
                yield RowProblem(name, "no invocation.started entry records it")
            continue
        pairs: list[tuple[str, Any, Any]] = [
            ("workflow", invocation.workflow_name, started.data.get("workflow")),
            ("version", invocation.workflow_version, started.data.get("version")),
        ]
        if started.canonical_text:  # hashed in canonical form: the input's hash compares
            pairs.append(
                ("input's hash", _input_hash(invocation.input), started.data.get("input_hash"))
            )
        yield from _differences(name, started, pairs)
        control = recorded.control.get(key)
        cancelled = control is not None and control.action == actions.INVOCATION_CANCELLED
        if cancelled != (invocation.status == NodeStatus.CANCELLED):
            said = f"entry {control.id} ({control.action})" if control else "no entry cancels it"
            yield RowProblem(
                name,
                f"its status is {invocation.status!r}, but {said}",
                control.id if control else None,
            )


def _input_hash(value: Any) -> str | None:
    try:
        return sha256_hex(canonical_json(value))
    except ValueError:
        return None


def _grants(recorded: _Recorded, rows: Iterable[Grant]) -> Iterator[RowProblem]:
    for grant in rows:
        name = f"grant {grant.pk}"
        entry = recorded.grants.get(grant.pk)
        if entry is None:
            yield RowProblem(name, "no grant.created entry records it")
            continue
        data = entry.data
        pairs: list[tuple[str, Any, Any]] = [
            ("workflow", grant.workflow_name, data.get("workflow")),
            ("node", grant.node_name, data.get("node")),
            ("scope", grant.scope, data.get("scope")),
            ("scope_id", grant.scope_id, data.get("scope_id")),
        ]
        if "uses_left" in data:  # (the grant's terms, recorded when it was made)
            made = data["uses_left"]
            uses = recorded.grant_uses[grant.pk]
            pairs += [
                ("pins", grant.pins, data.get("pins")),
                ("expiry", grant.expires_at, _instant(data.get("expires_at"))),
                (
                    f"uses_left (made with {made}, used {uses} times)",
                    grant.uses_left,
                    None if made is None else made - uses,
                ),
            ]
        if grant.granted_by_id is not None:
            pairs.append(("granter", grant.granted_by_id, entry.actor_id))
        yield from _differences(name, entry, pairs)
        revoked = recorded.revocations.get(grant.pk)
        if (grant.revoked_at is None) != (revoked is None):
            said = f"entry {revoked.id} revoked it" if revoked else "no entry revokes it"
            shown = "not revoked" if grant.revoked_at is None else "revoked"
            yield RowProblem(name, f"it shows {shown}, but {said}", revoked.id if revoked else None)
        elif revoked is not None and grant.revoked_by_id is not None:
            yield from _differences(
                name, revoked, [("revoker", grant.revoked_by_id, revoked.actor_id)]
            )


def _delegations(recorded: _Recorded, rows: Iterable[Delegation]) -> Iterator[RowProblem]:
    for delegation in rows:
        name = f"delegation {delegation.pk}"
        entry = recorded.delegations.get(delegation.pk)
        if entry is None:
            yield RowProblem(name, "no delegation.created entry records it")
            continue
        data = entry.data
        yield from _differences(
            name,
            entry,
            [
                ("delegator", delegation.delegator.get_username(), data.get("delegator")),
                ("delegate", delegation.delegate.get_username(), data.get("delegate")),
                ("start", delegation.starts_at, _instant(data.get("starts_at"))),
                ("end", delegation.ends_at, _instant(data.get("ends_at"))),
                ("workflows", delegation.workflows, data.get("workflows")),
            ],
        )
        ended = recorded.delegation_ends.get(delegation.pk)
        ended_at = _instant(ended.data.get("ended_at")) if ended else None
        if delegation.ended_at != ended_at:
            said = f"entry {ended.id} recorded {ended_at}" if ended else "no entry ends it"
            yield RowProblem(
                name,
                f"it shows ended at {delegation.ended_at}, but {said}",
                ended.id if ended else None,
            )


def check_rows(invocation: str | None = None) -> list[RowProblem]:
    """Every row that disagrees with the entries (of `invocation` only, when given: its
    decisions, questions and itself; grants and delegations are checked in the full run)."""
    entries = AuditEntry.objects.filter(action__in=ROW_ACTIONS).order_by("id")
    decisions = Decision.objects.order_by("id")
    interrupts = Interrupt.objects.only("id", "status", "response", "resolved_by_id", "round")
    invocations = Invocation.objects.only(
        "id", "status", "workflow_name", "workflow_version", "input", "audit_head"
    )
    if invocation is not None:
        entries = entries.filter(invocation_id=invocation)
        decisions = decisions.filter(interrupt__invocation_id=invocation)
        interrupts = interrupts.filter(invocation_id=invocation)
        invocations = invocations.filter(pk=invocation)
    recorded = _Recorded()
    for entry in entries.only(*ENTRY_COLUMNS, "data", "canonical_text").iterator(chunk_size=2000):
        recorded.add(entry)
    problems = [
        *_invocations(recorded, invocations.iterator(chunk_size=2000)),
        *_interrupts(recorded, interrupts.iterator(chunk_size=2000)),
        *_decisions(recorded, decisions.iterator(chunk_size=2000)),
    ]
    if invocation is None:
        problems += _grants(
            recorded, Grant.objects.order_by("created_at").iterator(chunk_size=2000)
        )
        delegations = Delegation.objects.select_related("delegator", "delegate").order_by("id")
        problems += _delegations(recorded, delegations.iterator(chunk_size=2000))
    return problems
