"""Named engine errors. Each carries the data a caller needs to report it."""

from typing import Any


class WorkflowError(Exception):
    """Base class of every error the engine raises on purpose."""

    code = "workflow_error"


class UnknownInterruptError(WorkflowError, LookupError):
    """A FunctionResponse names an interrupt this store (or runner) does not know."""

    code = "unknown_interrupt"

    def __init__(self, interrupt_id: str):
        self.interrupt_id = interrupt_id
        super().__init__(f"unknown interrupt id {interrupt_id!r}")


class InterruptNotPendingError(WorkflowError):
    """The interrupt was already answered differently, cancelled or expired."""

    code = "interrupt_not_pending"

    def __init__(self, interrupt_id: str, status: str, detail: str = ""):
        self.interrupt_id = interrupt_id
        self.status = str(status)
        message = f"interrupt {interrupt_id!r} is {self.status}, not pending"
        super().__init__(f"{message}: {detail}" if detail else message)


class InterruptSupersededError(InterruptNotPendingError):
    """The question belonged to a node run a rewind superseded (DESIGN 3.8): no answer or
    decision to it counts any more, not even a repeat of its old answer."""

    code = "interrupt_superseded"

    def __init__(self, interrupt_id: str):
        super().__init__(interrupt_id, "superseded", "a rewind took it out of the invocation")


class NotRewindableError(WorkflowError):
    """The answer cannot be changed now. `reason`: cancelled (the invocation), pending
    (answer it instead), superseded, not_answered (expired without a default: retry asks
    again), running (another execution holds the invocation: try again), no_lineage (its
    runs predate the lineage a rewind needs)."""

    code = "not_rewindable"

    def __init__(self, interrupt_id: str, reason: str, detail: str = ""):
        self.interrupt_id = interrupt_id
        self.reason = reason
        message = f"the answer to interrupt {interrupt_id!r} cannot be changed: {reason}"
        super().__init__(f"{message} ({detail})" if detail else message)


class EffectsWouldRepeatError(WorkflowError):
    """A rewind would make effects happen again (DESIGN 3.8): `effects` lists them,
    `[{path, name, started_at, finished_at, in_doubt}]`; confirm them to go on."""

    code = "effects_would_repeat"

    def __init__(self, interrupt_id: str, effects: list[dict[str, Any]]):
        self.interrupt_id = interrupt_id
        self.effects = effects
        names = ", ".join(f"{e['name']} of {e['path']}" for e in effects)
        super().__init__(
            f"changing the answer to interrupt {interrupt_id!r} would repeat {names}: "
            "confirm them (confirm_effects) to go on"
        )


class ResponseValidationError(WorkflowError, ValueError):
    """An answer does not match its interrupt's response_schema (or is malformed)."""

    code = "invalid_response"

    def __init__(
        self,
        interrupt_id: str | None,
        field: str,
        message: str,
        problems: list[tuple[str, str]] | None = None,
    ):
        self.interrupt_id = interrupt_id
        self.field = field
        self.message = message
        # Every (field, message) found, the one above first.
        self.problems = problems or [(field, message)]
        where = f"interrupt {interrupt_id!r}, " if interrupt_id else ""
        listed = "; ".join(f"field {f!r}: {m}" for f, m in self.problems)
        super().__init__(f"{where}{listed}")


class AlreadyDecidedError(WorkflowError):
    """One decision per person: this actor already decided on this interrupt."""

    code = "already_decided"

    def __init__(self, interrupt_id: str, actor: str):
        self.interrupt_id = interrupt_id
        self.actor = actor
        super().__init__(f"{actor} already decided on interrupt {interrupt_id!r}")


class DecisionRequiredError(WorkflowError):
    """A question that needs several approvals is answered by people's decisions only:
    a person may not submit its answer directly."""

    code = "decision_required"

    def __init__(self, interrupt_id: str, quorum: int):
        self.interrupt_id = interrupt_id
        self.quorum = quorum
        super().__init__(
            f"interrupt {interrupt_id!r} needs {quorum} approvals: each person records a "
            f"decision (POST interrupts/{interrupt_id}/decisions/), nobody answers it directly"
        )


class AlreadyClaimedError(WorkflowError):
    """Someone else is working on this interrupt (release it first, or decide anyway)."""

    code = "already_claimed"

    def __init__(self, interrupt_id: str, claimed_by: str):
        self.interrupt_id = interrupt_id
        self.claimed_by = claimed_by
        super().__init__(f"interrupt {interrupt_id!r} is claimed by {claimed_by}")


class MultipleInvocationsError(WorkflowError, ValueError):
    """One submission answered interrupts of more than one invocation."""

    code = "multiple_invocations"

    def __init__(self, invocation_ids: list[str]):
        self.invocation_ids = sorted(invocation_ids)
        super().__init__(
            "function responses must belong to one invocation; got "
            + ", ".join(repr(i) for i in self.invocation_ids)
        )


class InvocationNotFoundError(WorkflowError, LookupError):
    code = "unknown_invocation"

    def __init__(self, invocation_id: Any):
        self.invocation_id = invocation_id
        super().__init__(f"unknown invocation {invocation_id!r}")


class InvocationStateError(WorkflowError):
    """The operation does not apply to the invocation in its current status."""

    code = "invalid_invocation_state"

    def __init__(self, invocation_id: Any, status: str, operation: str):
        self.invocation_id = invocation_id
        self.status = str(status)
        super().__init__(f"cannot {operation} invocation {invocation_id!r}: it is {self.status}")


class DuplicateInterruptError(WorkflowError):
    """A node raised an interrupt id that another node run already holds."""

    code = "duplicate_interrupt"

    def __init__(self, interrupt_id: str, holder: str):
        self.interrupt_id = interrupt_id
        super().__init__(f"interrupt id {interrupt_id!r} is already held by {holder}")


class GraphError(WorkflowError, ValueError):
    """A workflow definition is malformed (unknown node, duplicate name, bad edge)."""

    code = "invalid_graph"


class NodeOutputError(WorkflowError):
    """A node (or workflow) produced more than one output in one run."""

    code = "duplicate_output"


class ExecutionAbortedError(WorkflowError):
    """Stops a running execution at its next checkpoint; not a failure of any node."""


class InvocationCancelledError(ExecutionAbortedError):
    """Raised inside a running execution when its invocation was cancelled meanwhile."""

    code = "cancelled"


class DefinitionChangedError(WorkflowError):
    """A stored run names a node its workflow definition no longer has."""

    code = "definition_changed"


class IdempotencyKeyReusedError(WorkflowError):
    """An idempotency key already started an invocation with another workflow or input."""

    code = "idempotency_key_reused"

    def __init__(self, key: str, invocation_id: str):
        self.key = key
        self.invocation_id = invocation_id
        super().__init__(
            f"idempotency key {key!r} already started invocation {invocation_id} "
            "with another workflow or input"
        )


class InvocationFinishedError(ExecutionAbortedError):
    """Raised inside a running execution whose invocation reached a final status
    meanwhile (failed by the deadline sweep, say): no write changes a final status."""

    code = "invocation_finished"


class LeaseLostError(ExecutionAbortedError):
    """The execution lease expired and another worker took the invocation over."""

    code = "lease_lost"


class ValueEncodingError(WorkflowError, ValueError):
    """A value the stores cannot keep: not JSON, NaN, a NUL character, too large..."""

    code = "unencodable_value"

    def __init__(self, what: str, reason: str, *, too_large: bool = False):
        self.what = what
        self.reason = reason
        self.too_large = too_large
        super().__init__(f"{what} cannot be stored: {reason}")


class FieldError(WorkflowError, ValueError):
    """A value given for `field` is not acceptable (see the subclasses' codes)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"field {field!r}: {message}")


class InputValidationError(FieldError):
    """The input given to start an invocation is not acceptable."""

    code = "invalid_input"


class PayloadTooLargeError(FieldError):
    """An answer or an input is larger than the configured limit."""

    code = "payload_too_large"


class NodeTimeoutError(WorkflowError):
    """A node body ran longer than its `timeout`."""

    code = "node_timeout"


class GrantUnavailableError(WorkflowError):
    """A grant a dispatch was about to pass on was revoked, expired or used up meanwhile
    (the gate then asks)."""

    code = "grant_unavailable"

    def __init__(self, grant_id: str):
        self.grant_id = grant_id
        super().__init__(f"grant {grant_id!r} is no longer live")


class UnknownGrantError(WorkflowError, LookupError):
    code = "unknown_grant"

    def __init__(self, grant_id: Any):
        self.grant_id = grant_id
        super().__init__(f"unknown grant {grant_id!r}")


class UnknownDelegationError(WorkflowError, LookupError):
    code = "unknown_delegation"

    def __init__(self, delegation_id: Any):
        self.delegation_id = delegation_id
        super().__init__(f"unknown delegation {delegation_id!r}")


class InvalidGrantError(FieldError):
    """A grant asked for with values it cannot have (an unknown gate, a scope the gate
    does not allow, pins that are not a JSON Schema...)."""

    code = "invalid_grant"
