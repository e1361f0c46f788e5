"""AG-UI 1.0 (DESIGN 4.5): a workflow behind an agent chat UI, with the `ag-ui-protocol`
package's event models and encoder.

A RunAgentInput's `threadId` is a session, `forwardedProps` (else `state`) the workflow's
input. A run with `resume[]` answers questions of the thread (agui_answers.py) and
follows their invocation; a run whose `runId` is an invocation of the thread follows it;
any other starts one. Following streams `RUN_STARTED`, a step per node run
(`STEP_STARTED` when it is seen running, else with its outcome; `STEP_FINISHED` at its
outcome, or before the run ends), and, once the invocation stops, a `STATE_SNAPSHOT` and
`RUN_FINISHED`: with the interrupt outcome (the questions the caller may answer, as
envelopes), the output, or `RUN_ERROR` for a failure. Questions for others appear only in
the snapshot, as waiting on others.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import Interrupt as AguiInterrupt
from ag_ui.core import (
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
)
from ag_ui.encoder import EventEncoder
from django.core.serializers.json import DjangoJSONEncoder
from pydantic import ValidationError

from workflows import services
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt as Question
from workflows.models import Invocation, Session
from workflows.policy import may_read_question, may_use_session

from . import stream
from .agui_answers import ResumeRefusedError, answer
from .envelope import envelope
from .visibility import withheld

ENCODER = EventEncoder()
REASONS = {
    "input": "input_required",
    "tool_call": "tool_call",
    "gate": "confirmation",
    "in_doubt": "confirmation",
}


class RunInputError(ValueError):
    code = "invalid_run_input"

    def __init__(self, detail: str, errors: Any = None) -> None:
        super().__init__(detail)
        self.errors = errors


class UnknownThreadError(LookupError):
    code = "unknown_thread"


def run_input(data: Any) -> RunAgentInput:
    """The body as a RunAgentInput; RunInputError naming what its schema refuses."""
    try:
        given = RunAgentInput.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(map(str, e["loc"])), "message": e["msg"]} for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "", "message": "invalid"}
        raise RunInputError(
            f"not a RunAgentInput: {first['field']}: {first['message']}", errors
        ) from None
    try:
        uuid.UUID(given.thread_id)
    except ValueError:
        raise RunInputError(f"threadId {given.thread_id[:64]!r} is not a UUID") from None
    return given


def thread(given: RunAgentInput, user: Any) -> Session:
    """The session `threadId` names, opened for `user` when new (a resume needs one that
    exists); UnknownThreadError for one they may not use."""
    if given.resume:
        session = Session.objects.filter(pk=given.thread_id).first()
    else:
        session = services.open_session(given.thread_id, user=user)[0]
    if session is None or not may_use_session(user, session):
        raise UnknownThreadError(f"no thread {given.thread_id!r} of yours")
    return session


def workflow_input(given: RunAgentInput) -> Any:
    return given.forwarded_props if given.forwarded_props not in (None, {}) else given.state


@dataclass
class Run:
    """What a RunAgentInput asked for: the invocation to follow, from which position, or
    the refusal to report."""

    given: RunAgentInput
    user: Any
    invocation_id: str | None = None
    after: stream.Position = field(default_factory=stream.Position)
    refused: ResumeRefusedError | None = None


def begin(workflow: str, given: RunAgentInput, user: Any) -> Run:
    """Answer, find or start the invocation a RunAgentInput is about (nothing streamed
    yet). Raises UnknownThreadError; a refused resume is the run's `refused`."""
    session = thread(given, user)
    run = Run(given, user)
    if given.resume:
        ids = [entry.interrupt_id for entry in given.resume]
        owner = Question.objects.filter(pk__in=ids, invocation__session=session).first()
        if owner is not None:
            run.after = _last_position(str(owner.invocation_id))
        try:
            run.invocation_id = answer(given.resume, session, user)
        except ResumeRefusedError as exc:
            run.refused = exc
        return run
    run_key = _uuid(given.run_id)
    mine = Invocation.objects.filter(pk=run_key, session=session).first() if run_key else None
    if mine is not None:
        run.invocation_id = str(mine.pk)
        return run
    started = services.start(workflow, workflow_input(given), user=user, session=session)
    run.invocation_id = str(started.pk)
    return run


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _last_position(invocation_id: str) -> stream.Position:
    last = stream.SessionEvent.objects.filter(invocation_id=invocation_id).order_by("-id").first()
    return stream.Position(last.pk, True) if last is not None else stream.Position()


def encoded(*events: Any) -> list[str]:
    return [ENCODER.encode(event) for event in events]


def _jsonable(value: Any) -> Any:
    """A value as JSON has it (dates as ISO text), for the events' free-form fields."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def as_interrupt(shown: dict[str, Any], invocation_id: str) -> AguiInterrupt:
    """An envelope as an AG-UI interrupt."""
    expires = shown["expires_at"]
    metadata = {
        "kind": shown["kind"],
        "invocation": invocation_id,
        "payload": shown["payload"],
        "needs": shown["needs"],
        "actionFingerprint": shown["action_fingerprint"],
        "dueAt": shown["due_at"],
        "priority": shown["priority"],
        "links": shown["links"],
    }
    return AguiInterrupt(
        id=shown["id"],
        reason=REASONS[shown["kind"]],
        message=shown["message"] or None,
        tool_call_id=shown["tool_call_id"],
        response_schema=shown["response_schema"],
        expires_at=expires.isoformat() if expires is not None else None,
        metadata=_jsonable(metadata),
    )


def finish(run: Run, batch: stream.Batch) -> list[str]:
    """The snapshot and the end of the run, once the invocation stopped."""
    invocation_id = run.invocation_id or ""
    pending = Question.objects.filter(
        invocation_id=invocation_id, status=InterruptStatus.PENDING
    ).prefetch_related("decisions")
    answerable, others = [], []
    for question in pending.select_related("invocation").order_by("created_at", "pk"):
        shown = envelope(question, run.user) if may_read_question(run.user, question) else None
        if shown is not None and shown["answerable"]:
            answerable.append(shown)
        else:
            others.append(withheld(question) if shown is None else shown)
    snapshot = {
        "invocation": invocation_id,
        "status": batch.status,
        "waiting_on_others": others,
        "questions": [s["id"] for s in answerable],
        "output": batch.output if batch.status == NodeStatus.COMPLETED else None,
    }
    events: list[Any] = [StateSnapshotEvent(snapshot=_jsonable(snapshot))]
    if batch.status == NodeStatus.FAILED:
        events.append(RunErrorEvent(message=batch.error or "the run failed", code="run_failed"))
        return encoded(*events)
    outcome: Any
    result = None
    if batch.status == NodeStatus.CANCELLED:
        outcome = RunFinishedCancelledOutcome()
    elif answerable:
        interrupts = [as_interrupt(shown, invocation_id) for shown in answerable]
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
    else:  # completed, or waiting on others only
        outcome = RunFinishedSuccessOutcome()
        result = _jsonable(batch.output) if batch.status == NodeStatus.COMPLETED else None
    finished = RunFinishedEvent(
        thread_id=run.given.thread_id, run_id=run.given.run_id, result=result, outcome=outcome
    )
    return encoded(*events, finished)


def renderer(run: Run) -> stream.Render:
    """Turns each read of the run's invocation into AG-UI events (RUN_STARTED first)."""
    started = [RunStartedEvent(thread_id=run.given.thread_id, run_id=run.given.run_id)]

    steps: set[str] = set()  # started and not finished: AG-UI refuses a run ending with one

    def render(batch: stream.Batch, position: stream.Position) -> list[str]:
        sent = encoded(*started)
        started.clear()
        for event in batch.events:
            if event.status and stream.Position(event.pk, True) > position:
                if event.path not in steps:  # started and ended between two reads
                    sent += encoded(StepStartedEvent(step_name=event.path))
                steps.discard(event.path)
                sent += encoded(StepFinishedEvent(step_name=event.path))
        for node_run in batch.running:
            if node_run.path not in steps:
                steps.add(node_run.path)
                sent += encoded(StepStartedEvent(step_name=node_run.path))
        if batch.stopped:
            sent += encoded(*(StepFinishedEvent(step_name=path) for path in sorted(steps)))
            steps.clear()
            sent += finish(run, batch)
        return sent

    return render


def refusal(run: Run) -> list[str]:
    """The stream of a refused resume: started, then the error naming the entry."""
    refused = run.refused
    assert refused is not None
    started = RunStartedEvent(thread_id=run.given.thread_id, run_id=run.given.run_id)
    return encoded(started, RunErrorEvent(message=str(refused), code=refused.code))


def stopped(batch: stream.Batch) -> bool:
    return batch.stopped
