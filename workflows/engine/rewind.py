"""Rewind: change an answer already given (DESIGN 3.8), as a pure rule.

From what a store holds of one invocation (RewindReads) the rule computes the slice (the
anchor that owns the question and its ancestors reopened; what the old answer's output
triggered superseded, level by level up to the root) and the one WriteBatch that records
the rewind. The Runner and the Django services apply it; nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import (
    DecisionRequiredError,
    EffectsWouldRepeatError,
    NotRewindableError,
    UnknownInterruptError,
)
from .events import Event, FunctionResponse
from .nodes import BaseNode, ParallelWorker
from .questions import is_effect_question, is_gate_question
from .schema import validate_response
from .state import (
    LINEAGE_UNRECORDED,
    EffectRecord,
    InterruptRecord,
    NodeRunState,
    RewindReads,
    WriteBatch,
    copied,
)
from .status import EffectStatus, InterruptStatus, NodeStatus
from .transitions import same_answer

# What a caller confirms: True (every effect listed), or the (path, name) pairs it saw.
Confirmation = bool | Iterable[tuple[str, str]]

_REPEATING = {EffectStatus.FINISHED, EffectStatus.STARTED, EffectStatus.IN_DOUBT}
_REWIND_SUFFIX = re.compile(r":rewind-(\d+)$")


@dataclass(frozen=True)
class RewindPlan:
    """What a rewind would do: the paths reopened (the anchor first, then its ancestors)
    and superseded, the question ids superseded, and the effects that would repeat
    (`[{path, name, started_at, finished_at, in_doubt}]`)."""

    reopened: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Rewind:
    """A rewind computed: its plan and the batch that stores it (None: the new answer
    equals the current one, nothing changes)."""

    plan: RewindPlan
    batch: WriteBatch | None
    old_response: Any = None
    response: Any = None


def check_rewindable(
    interrupt_id: str,
    record: InterruptRecord | None,
    reads: RewindReads | None,
    *,
    workflow_name: str | None = None,
    by_decisions: bool = False,
) -> InterruptRecord:
    """The question, or the named error that refuses its rewind. `reads` None: another
    execution holds the invocation's lease. `by_decisions`: a quorum's new round met."""
    if record is None or (workflow_name and record.workflow_name != workflow_name):
        raise UnknownInterruptError(interrupt_id)
    if reads is None:
        raise NotRewindableError(interrupt_id, "running", "another execution holds it")
    record = reads.questions.get(interrupt_id, record)
    if reads.checkpoint.invocation.status == NodeStatus.CANCELLED:
        raise NotRewindableError(interrupt_id, "cancelled", "the invocation was cancelled")
    if record.status == InterruptStatus.SUPERSEDED:
        raise NotRewindableError(interrupt_id, "superseded")
    if record.status == InterruptStatus.PENDING and not by_decisions:
        raise NotRewindableError(interrupt_id, "pending", "it waits for an answer: answer it")
    if record.status in (InterruptStatus.EXPIRED, InterruptStatus.CANCELLED) and (
        record.response is None
    ):
        raise NotRewindableError(interrupt_id, "not_answered", "retry asks it again")
    if record.request.quorum > 1 and not by_decisions:
        raise DecisionRequiredError(interrupt_id, record.request.quorum)
    return record


def compute_rewind(
    root: BaseNode,
    reads: RewindReads,
    record: InterruptRecord,
    value: Any,
    *,
    actor: str | None = None,
    now: datetime | None = None,
    confirm_effects: Confirmation = False,
) -> Rewind:
    """Validate the new answer (as `transitions.checked_answer` returns it: unwrapped,
    encoded) against the question's schema and compute the rewind's writes (see the module
    doc); EffectsWouldRepeatError when effects would repeat and are not all confirmed."""
    validate_response(record.id, record.request.response_schema, value)
    old = record.response
    if same_answer(old, value):
        return Rewind(RewindPlan(), None, old, value)
    if record.holds_answer:  # accepted and not yet applied: replaced in place
        batch = WriteBatch(record.invocation_id)
        batch.events.append(_answer_event(record, value, reads.answer_position))
        batch.interrupt_updates.append(
            copied(record, response=value, resolved_by=actor, resolved_at=now)
        )
        return Rewind(RewindPlan(), batch, old, value)
    slice_ = _Slice(root, reads, record)
    plan = slice_.plan()
    _check_confirmed(record.id, plan.effects, confirm_effects)
    return Rewind(plan, slice_.batch(value, actor, now), old, value)


def plan_rewind(root: BaseNode, reads: RewindReads, record: InterruptRecord) -> RewindPlan:
    """The preview: what a rewind of `record` would reopen, supersede and repeat."""
    return _Slice(root, reads, record).plan()


def _check_confirmed(interrupt_id: str, effects: list[dict[str, Any]], given: Any) -> None:
    if not effects or given is True:
        return
    confirmed = set() if given is False or given is None else {tuple(p) for p in given}
    if any((e["path"], e["name"]) not in confirmed for e in effects):
        raise EffectsWouldRepeatError(interrupt_id, effects)


def _answer_event(record: InterruptRecord, value: Any, replaces: int | None) -> Event:
    return Event(
        author="user",
        invocation_id=record.invocation_id,
        path=record.path,
        run_id=record.run_id,
        function_responses=[FunctionResponse(record.id, "rewind", value)],
        rewound=True,
        replaces=replaces,
    )


def _name(path: str) -> str:
    return path.rpartition("/")[2].rpartition("@")[0]


def node_at(root: BaseNode, path: str) -> BaseNode | None:
    """The node of the run at `path` (None for a dynamic parent's child: not in a graph)."""
    node: BaseNode | None = root
    for segment in path.split("/")[1:]:
        name = segment.rpartition("@")[0]
        nodes = getattr(node, "nodes", None)
        if isinstance(nodes, dict):
            node = nodes.get(name)
        elif isinstance(node, ParallelWorker) and node.item_node.name == name:
            node = node.item_node
        else:
            return None
    return node


class _Slice:
    """The slice of one rewind, computed once from the reads."""

    def __init__(self, root: BaseNode, reads: RewindReads, record: InterruptRecord) -> None:
        self.root = root
        self.reads = reads
        self.record = record
        self.runs = reads.checkpoint.node_runs
        self.anchor = record.path
        self.children: dict[str, list[str]] = {}
        for path, state in self.runs.items():  # in the order the runs were made
            self.children.setdefault(state.parent_path, []).append(path)
        self.reopened: list[str] = []
        self.superseded: list[str] = []
        self.fresh_joins: dict[str, NodeRunState] = {}
        self._walk()
        own = is_gate_question(record.id) or is_effect_question(record.id)
        node = node_at(root, self.anchor)
        self.reexecutes = node is None or node.rerun_on_resume or own
        self.questions = self._superseded_questions()
        gone = set(self.superseded)
        # Answers and waits the reopened runs lose: the rewound question's (it comes back
        # as the new answer), the superseded ones', and any of a superseded run.
        self.dropped = {record.id, *self.questions}
        self.dropped |= {q.id for q in reads.questions.values() if q.path in gone}
        if self.reexecutes:
            gone.add(self.anchor)
        self.effects = [e for e in reads.effects if e.path in gone and e.status in _REPEATING]

    # -- the slice -----------------------------------------------------------------------
    def _walk(self) -> None:
        taken: set[str] = set()
        x = self.anchor
        self.reopened.append(x)
        while self.runs[x].parent_path:
            parent = self.runs[x].parent_path
            siblings = [
                p
                for p in self.children.get(parent, [])
                if p != x and self.runs[p].status != NodeStatus.SUPERSEDED
            ]
            node = node_at(self.root, parent)
            if isinstance(getattr(node, "nodes", None), dict):
                taken |= self._triggered(x, parent, siblings)
            elif not isinstance(node, ParallelWorker):  # a dynamic parent: later calls
                order = {p: i for i, p in enumerate(self.children[parent])}
                taken |= {p for p in siblings if order[p] > order[x]}
            self.reopened.append(parent)
            x = parent
        self.superseded = [p for p in self.runs if self._inside(p, taken)]

    def _inside(self, path: str, taken: set[str]) -> bool:
        """Whether the run at `path` is taken or nested in a taken run (and not superseded
        already)."""
        state = self.runs[path]
        if state.status == NodeStatus.SUPERSEDED:
            return False
        while path:
            if path in taken:
                return True
            path = self.runs[path].parent_path if path in self.runs else ""
        return False

    def _triggered(self, x: str, parent: str, siblings: list[str]) -> set[str]:
        """The runs of a workflow run `parent` that `x`'s output triggered, transitively;
        a fresh run for each join that loses an input and keeps others."""
        for path in siblings:
            if self.runs[path].triggered_by == LINEAGE_UNRECORDED:
                raise NotRewindableError(self.record.id, "no_lineage", path)
        taken: set[str] = set()
        changed = True
        while changed:
            changed = False
            for path in siblings:
                if path in taken:
                    continue
                cause = self.runs[path].triggered_by
                sources = cause.values() if isinstance(cause, dict) else [cause]
                if any(s == x or s in taken for s in sources):
                    taken.add(path)
                    changed = True
        self._refill_joins(x, parent, taken)
        return taken

    def _refill_joins(self, x: str, parent: str, taken: set[str]) -> None:
        latest: dict[str, str] = {}
        for path in taken:
            state = self.runs[path]
            if isinstance(state.triggered_by, dict):
                known = latest.get(state.name)
                if known is None or self.runs[known].run_id < state.run_id:
                    latest[state.name] = path
        for name, path in latest.items():
            state = self.runs[path]
            assert isinstance(state.triggered_by, dict)
            kept = {
                p: source
                for p, source in state.triggered_by.items()
                if source != x and source not in taken
            }
            if not kept:
                continue
            run_id = 1 + max(
                s.run_id for s in self.runs.values() if s.parent_path == parent and s.name == name
            )
            inputs = state.input if isinstance(state.input, dict) else {}
            fresh = NodeRunState(
                NodeStatus.PENDING,
                run_id,
                name=name,
                parent_path=parent,
                input={p: inputs.get(p) for p in kept},
                triggered_by=kept,
            )
            self.fresh_joins[f"{parent}/{name}@{run_id}"] = fresh

    # -- what it changes -----------------------------------------------------------------
    def _superseded_questions(self) -> list[str]:
        gone = set(self.superseded)
        asked_after = self.record.resolved_at
        found = []
        for q in self.reads.questions.values():
            if q.id == self.record.id or q.status == InterruptStatus.SUPERSEDED:
                continue
            if q.path in gone:
                found.append(q.id)
            elif (
                q.path == self.anchor
                and self.reexecutes
                and asked_after is not None
                and q.asked_at is not None
                and q.asked_at > asked_after
            ):
                found.append(q.id)  # the anchor asked it after the old answer
        return sorted(found)

    def plan(self) -> RewindPlan:
        return RewindPlan(
            reopened=list(self.reopened),
            superseded=list(self.superseded),
            questions=list(self.questions),
            effects=[
                {
                    "path": e.path,
                    "name": e.name,
                    "started_at": e.started_at,
                    "finished_at": e.finished_at,
                    "in_doubt": e.status != EffectStatus.FINISHED,
                }
                for e in self.effects
            ],
        )

    def batch(self, value: Any, actor: str | None, now: datetime | None) -> WriteBatch:
        record, reads = self.record, self.reads
        invocation = reads.checkpoint.invocation
        reopened = copied(
            invocation, status=NodeStatus.RUNNING, output=None, error=None, rewound=True
        )
        batch = WriteBatch(invocation.id, invocation=reopened, reopens=True)
        batch.events.append(_answer_event(record, value, reads.answer_position))
        for path in self.superseded:
            state = self.runs[path]
            batch.node_runs[path] = copied(state, status=NodeStatus.SUPERSEDED, interrupt_ids=set())
            batch.events.append(
                Event(
                    author=state.name,
                    invocation_id=invocation.id,
                    path=path,
                    run_id=state.run_id,
                    status=NodeStatus.SUPERSEDED,
                )
            )
        batch.node_runs.update(self.fresh_joins)
        for path in self.reopened:
            batch.node_runs[path] = self._reopened(path)
        batch.interrupt_updates.append(
            copied(
                record,
                status=InterruptStatus.RESOLVED,
                response=value,
                consumed=False,
                deferred=False,
                resolved_by=actor,
                resolved_at=now,
            )
        )
        for interrupt_id in self.questions:
            question = reads.questions[interrupt_id]
            batch.interrupt_updates.append(
                copied(question, status=InterruptStatus.SUPERSEDED, consumed=True, deferred=False)
            )
        batch.revoke_grants_of.add(record.id)
        batch.effects += [_again(e) for e in self.effects if e.path == self.anchor]
        return batch

    def _reopened(self, path: str) -> NodeRunState:
        """A reopened run as stored: RUNNING, waiting on the rewound question, without the
        answers the rewind takes back and with its terminal output withdrawn."""
        state = self.runs[path]
        waits = {i for i in state.interrupt_ids if i not in self.dropped}
        kept_inputs = {i: v for i, v in state.resume_inputs.items() if i not in self.dropped}
        if path == self.anchor:
            output = state.output if state.status == NodeStatus.WAITING else None
            gate = None if is_gate_question(self.record.id) else state.gate
        else:
            output, gate = self._kept_output(path), state.gate
        return copied(
            state,
            status=NodeStatus.RUNNING,
            output=output,
            interrupt_ids=waits | {self.record.id},
            resume_inputs=kept_inputs,
            error=None,
            gate=gate,
        )

    def _kept_output(self, path: str) -> Any:
        """A workflow run's output when a terminal child outside the slice produced it;
        None otherwise (withdrawn until a terminal run produces one again)."""
        node = node_at(self.root, path)
        is_terminal = getattr(node, "is_terminal", None)
        if is_terminal is None:
            return None  # a dynamic parent or a worker makes its output again
        out_of_slice = set(self.superseded) | set(self.reopened)
        for child in self.children.get(path, []):
            state = self.runs[child]
            if (
                child not in out_of_slice
                and state.status == NodeStatus.COMPLETED
                and state.output is not None
                and is_terminal(state.name)
            ):
                return self.runs[path].output
        return None


def _again(effect: EffectRecord) -> EffectRecord:
    """An anchor's confirmed effect, to be called again under a key of its own."""
    found = _REWIND_SUFFIX.search(effect.key)
    base = effect.key[: found.start()] if found else effect.key
    rounds = int(found.group(1)) + 1 if found else 1
    return copied(effect, status=EffectStatus.REWOUND, key=f"{base}:rewind-{rounds}")
