"""Effects: side effects a node performs once (`ctx.effect`, `ctx.effect_sync`).

Each effect is recorded as started, durably, before its function is called, and as
finished, with its result, durably before `ctx.effect` returns (a crash in between leaves
it started: in doubt). A re-execution of the node returns a finished effect's result
without calling the function again; one in doubt is called again with the same
idempotency key when declared idempotent, otherwise the node asks a person whether it
happened, with the rules of the question that let it happen (its gate's).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .events import RequestInput
from .nodes import is_async_callable
from .questions import QuestionRaised, effect_question_id
from .schema import to_json_schema
from .state import EffectRecord, copied
from .status import EffectStatus
from .values import clean_text, to_json_value

if TYPE_CHECKING:
    from .context import Context

IN_DOUBT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "happened": {
            "type": "boolean",
            "title": "It happened",
            "description": "Checked: it took effect (its result below is used, it is not "
            "done again). Unchecked: it did not, and it is done now.",
        },
        "result": {"title": "Its result", "description": "What it returned, when it happened"},
    },
    "required": ["happened"],
    "additionalProperties": False,
}


def in_doubt_schema(result_schema: Any = None, quorum: int = 1) -> dict[str, Any]:
    """The answer to an in-doubt question: with `result_schema`, a `result` valid against
    it is required when it happened; with a quorum, each approver confirms the answer
    (`approved`) and the same answer must be given by all (see `vote_conflict`)."""
    schema: dict[str, Any] = {
        **IN_DOUBT_SCHEMA,
        "properties": dict(IN_DOUBT_SCHEMA["properties"]),
    }
    result = to_json_schema(result_schema)
    if result is not None:
        schema["properties"]["result"] = {**IN_DOUBT_SCHEMA["properties"]["result"], **result}
        schema["if"] = {"properties": {"happened": {"const": True}}, "required": ["happened"]}
        schema["then"] = {"required": ["result"]}
    if quorum > 1:
        schema["properties"].update(
            approved={"type": "boolean", "const": True, "title": "I confirm this answer"},
            decisions={"type": "array"},  # added by the approval service
        )
        schema["required"] = ["happened", "approved"]
    return schema


def vote_conflict(earlier: list[Any], vote: Any) -> str | None:
    """Why `vote` on a quorum's in-doubt question differs from the votes cast before it
    (None when it agrees): every approver must give the same answer."""

    def said(answer: Any) -> tuple[Any, Any]:
        answer = answer if isinstance(answer, dict) else {}
        happened = answer.get("happened")
        return happened, answer.get("result") if happened else None

    for other in earlier:
        if said(other) != said(vote):
            happened, result = said(other)
            return (
                f"differs from an earlier decision (happened: {happened!r}, result: "
                f"{result!r}); every approver gives the same answer"
            )
    return None


@dataclass
class _Step:
    """What to do for one effect call: call the function under `record` (committing it
    first when `commit`), or, with no record, commit `finish` (when given) and return
    `result`."""

    record: EffectRecord | None
    result: Any = None
    commit: bool = False
    finish: EffectRecord | None = None


async def perform(
    ctx: Context,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    idempotent: bool,
    result_schema: Any = None,
) -> Any:
    step = _begin(ctx, await _records(ctx), name, idempotent, result_schema)
    execution = ctx._execution
    if step.record is None:
        if step.finish is not None:
            await execution.commit_effect(step.finish)
        return step.result
    if step.commit:
        await execution.commit_effect(step.record)
    call_kwargs = _with_key(fn, kwargs, step.record.key)
    try:
        if is_async_callable(fn):
            result = await fn(*args, **call_kwargs)
        else:
            result = await execution.run_sync(fn, *args, **call_kwargs)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:
        _failed(ctx, step.record, exc)
        raise
    done = _finished(ctx, step.record, result)
    await execution.commit_effect(done)
    return done.result


def perform_sync(
    ctx: Context,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    idempotent: bool,
    result_schema: Any = None,
) -> Any:
    step = _begin(ctx, _records_sync(ctx), name, idempotent, result_schema)
    execution = ctx._execution
    if step.record is None:
        if step.finish is not None:
            execution.commit_effect_sync(step.finish)
        return step.result
    if step.commit:
        execution.commit_effect_sync(step.record)
    try:
        result = fn(*args, **_with_key(fn, kwargs, step.record.key))
    except Exception as exc:
        _failed(ctx, step.record, exc)
        raise
    done = _finished(ctx, step.record, result)
    execution.commit_effect_sync(done)
    return done.result


async def _records(ctx: Context) -> dict[str, EffectRecord]:
    execution = ctx._execution
    known = execution.effects.get(ctx.path)
    if known is None:
        # A run that never ran before has no effects: no read.
        store = execution.store if ctx.may_have_effects else None
        known = await store.load_effects(ctx.invocation_id, ctx.path) if store else {}
        execution.effects[ctx.path] = known
    return known


def _records_sync(ctx: Context) -> dict[str, EffectRecord]:
    execution = ctx._execution
    known = execution.effects.get(ctx.path)
    if known is None:
        load = getattr(execution.store, "load_effects_sync", None)
        if execution.store is not None and load is None:
            raise TypeError(
                f"{type(execution.store).__name__} has no load_effects_sync: use "
                "`await ctx.effect(...)` in an async node"
            )
        known = load(ctx.invocation_id, ctx.path) if load and ctx.may_have_effects else {}
        execution.effects[ctx.path] = known
    return known


def _begin(
    ctx: Context,
    records: dict[str, EffectRecord],
    name: str,
    idempotent: bool,
    result_schema: Any,
) -> _Step:
    if not isinstance(name, str) or not name:
        raise ValueError(f"an effect's name must be a non-empty string, not {name!r}")
    if name in ctx.effect_names:
        raise ValueError(
            f"node {ctx.node_name!r} performed the effect {name!r} twice in one run; "
            "give each effect a name of its own"
        )
    ctx.effect_names.add(name)
    now = datetime.now(UTC)
    record = records.get(name)
    if record is None:
        key = f"{ctx.idempotency_key}:{name}"
        return _Step(
            EffectRecord(ctx.invocation_id, ctx.path, name, key, started_at=now), commit=True
        )
    if record.status == EffectStatus.FINISHED:
        return _Step(None, record.result)
    again = copied(
        record,
        status=EffectStatus.STARTED,
        attempts=record.attempts + 1,
        error=None,
        started_at=now,
    )
    if record.status == EffectStatus.FAILED:  # its function said it failed: call it again
        return _Step(again, commit=True)
    if record.status == EffectStatus.REWOUND:  # confirmed by a rewind: done again, new key
        return _Step(copied(again, result=None, finished_at=None), commit=True)
    # Started and never finished: in doubt.
    if idempotent:
        ctx._execution.keep_effect(again)  # started durably already: no commit before the call
        return _Step(again)
    question_id = effect_question_id(ctx.idempotency_key, name, record.attempts)
    if question_id not in ctx.own_answers:
        ctx._execution.keep_effect(copied(record, status=EffectStatus.IN_DOUBT))
        raise QuestionRaised(_in_doubt_question(ctx, record, question_id, result_schema))
    answer = ctx.own_answers[question_id]
    if answer["happened"]:
        # Without a result_schema an answer may leave the result out: None.
        done = _finished(ctx, record, answer.get("result"))
        return _Step(None, done.result, finish=done)
    return _Step(again, commit=True)


def _in_doubt_question(
    ctx: Context, record: EffectRecord, question_id: str, result_schema: Any
) -> RequestInput:
    """Asked with the rules of the question that let the effect happen: its node's gate
    (assignees, quorum, four-eyes, signature), whichever way the gate passed."""
    gate = getattr(ctx.node, "gate", None)
    quorum = gate.quorum if gate else 1
    return RequestInput(
        interrupt_id=question_id,
        message=(
            f"Did {record.name!r} happen? Node {ctx.node_name!r} started it and stopped "
            "before its result was recorded."
        ),
        payload={
            "node": ctx.node_name,
            "effect": record.name,
            "idempotency_key": record.key,
            "attempts": record.attempts,
        },
        response_schema=in_doubt_schema(result_schema, quorum),
        assignees=list(gate.assignees) if gate else [],
        quorum=quorum,
        four_eyes=gate.four_eyes if gate else False,
        require_signature=bool(gate.options.get("require_signature")) if gate else False,
    )


def _with_key(fn: Callable[..., Any], kwargs: dict[str, Any], key: str) -> dict[str, Any]:
    if "idempotency_key" in kwargs or not _accepts_key(fn):
        return kwargs
    return {**kwargs, "idempotency_key": key}


def _accepts_key(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins)
        return False
    return any(
        p.kind == p.VAR_KEYWORD or (p.name == "idempotency_key" and p.kind != p.POSITIONAL_ONLY)
        for p in parameters
    )


def _finished(ctx: Context, record: EffectRecord, result: Any) -> EffectRecord:
    """The effect's finished record (the caller commits it)."""
    execution = ctx._execution
    result = to_json_value(
        result, f"the result of effect {record.name!r}", execution.max_value_bytes
    )
    return copied(
        record, status=EffectStatus.FINISHED, result=result, finished_at=datetime.now(UTC)
    )


def _failed(ctx: Context, record: EffectRecord, exc: Exception) -> None:
    error = clean_text(f"{type(exc).__name__}: {exc}")
    ctx._execution.keep_effect(copied(record, status=EffectStatus.FAILED, error=error))
